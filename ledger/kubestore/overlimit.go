package kubestore

import (
	"context"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/ledger"
)

// OverLimitIndex is the cache index of bucket objects over their limit, by
// resource type: what AnyOverLimit reads.
const OverLimitIndex = "quotakeeper.overLimit.resourceType"

// indexed holds the caches IndexOverLimit has indexed: a manager may build
// several ledgers over one cache (the quotakeeper manager does), and a cache
// refuses an index it already has.
var indexed sync.Map // client.FieldIndexer -> struct{}

// IndexOverLimit adds OverLimitIndex to a cache, once (call before it
// starts); a Store whose Options.Reader is that cache sets
// Options.OverLimitIndexed.
func IndexOverLimit(ctx context.Context, indexer client.FieldIndexer) error {
	if _, done := indexed.LoadOrStore(indexer, struct{}{}); done {
		return nil
	}
	err := indexer.IndexField(ctx, &quotav1alpha1.AllowanceBucket{}, OverLimitIndex, func(o client.Object) []string {
		b, ok := o.(*quotav1alpha1.AllowanceBucket)
		if !ok || !overLimit(&b.Status) {
			return nil
		}
		return []string{b.Spec.ResourceType}
	})
	if err != nil {
		indexed.Delete(indexer)
	}
	return err
}

// overLimit is Bucket.OverLimit on the totals the ledger wrote together.
func overLimit(st *quotav1alpha1.AllowanceBucketStatus) bool {
	used, err := ledger.Add(st.Allocated, st.Reserved)
	return err != nil || used > st.Limit
}

// AnyOverLimit implements ledger.OverLimitFinder from the reader's index;
// without one it answers yes (look at each bucket).
func (s *Store) AnyOverLimit(ctx context.Context, resourceType string) (bool, error) {
	if !s.opts.OverLimitIndexed {
		return true, nil
	}
	over := &quotav1alpha1.AllowanceBucketList{}
	if err := s.opts.Reader.List(ctx, over, client.MatchingFields{OverLimitIndex: resourceType}, client.Limit(1)); err != nil {
		return true, err
	}
	return len(over.Items) > 0, nil
}
