// STANDIN: replaced by part A
// (ledger/observe.go of part A holds the real Observe; the lead drops this file at merge.)

package ledger

import (
	"context"
	"slices"
)

// Observation is what the observer saw for one bucket.
type Observation struct {
	Allocated   int64
	ByNamespace map[string]int64 // values >= 0, summing to Allocated (checked)
	Count       int64
	Fold        []string // reservation ids now counted in Allocated: removed in this write
	Expire      []string // reservation ids expired with no object: removed in this write
}

// Observe sets the observed figures, removes the listed reservations (absent
// ids are ignored), recomputes the limit from the grants, in one atomic
// write. Stand-in: the bucket of this branch has no Allocated field, so the
// observed total is kept as its only allocation; the split, the count and
// validation are A's.
func (l *Ledger) Observe(ctx context.Context, key BucketKey, obs Observation) (Bucket, error) {
	limit, contribs, err := limitFor(l.grants, key)
	if err != nil {
		return Bucket{}, err
	}
	return l.store.Apply(ctx, key, func(b *Bucket) error {
		b.Limit, b.Grants = limit, slices.Clone(contribs)
		b.Allocations = map[string]int64{}
		if obs.Allocated != 0 {
			b.Allocations["observed"] = obs.Allocated
		}
		for _, id := range slices.Concat(obs.Fold, obs.Expire) {
			delete(b.Reservations, id)
		}
		return nil
	})
}
