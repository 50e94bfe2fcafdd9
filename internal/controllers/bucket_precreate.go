package controllers

// Serves the bucket controller (bucket_controller.go): which buckets grants
// create before any claim arrives.

import (
	"k8s.io/apimachinery/pkg/selection"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// precreatedKeys are the buckets grants create before any claim arrives, so
// a consumer sees its quota (limit, zero allocated) as soon as it is
// granted: for each grant amount, the bucket whose dimensions its selector
// pins down — the dimensionless bucket for an amount without a selector, and
// {k: v, ...} for a selector made only of equalities (or single-valued In).
// Other selectors (NotIn, Exists, several values) describe no single bucket;
// the first claim that lands in one creates it.
func precreatedKeys(grants []ledger.Grant) []ledger.BucketKey {
	seen := map[ledger.BucketKey]bool{}
	var out []ledger.BucketKey
	for _, g := range grants {
		dims, ok := pinned(g)
		if !ok {
			continue
		}
		key := ledger.NewBucketKey(g.Consumer, g.ResourceType, dims)
		if !seen[key] {
			seen[key] = true
			out = append(out, key)
		}
	}
	return out
}

func pinned(g ledger.Grant) (map[string]string, bool) {
	if g.Selector == nil {
		return nil, true
	}
	reqs, selectable := g.Selector.Requirements()
	if !selectable {
		return nil, false
	}
	dims := map[string]string{}
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if r.Values().Len() != 1 {
				return nil, false
			}
			dims[r.Key()] = r.Values().List()[0]
		default:
			return nil, false
		}
	}
	return dims, true
}
