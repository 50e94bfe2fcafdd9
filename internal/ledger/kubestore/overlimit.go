package kubestore

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// OverLimitIndex is the cache index of bucket objects over their limit, by
// resource type: what AnyOverLimit reads.
const OverLimitIndex = "quotakeeper.overLimit.resourceType"

// IndexOverLimit adds OverLimitIndex to a cache (call before it starts, once:
// a cache refuses an index it already has, and a process builds one ledger
// over its cache); a Store whose Options.Reader is that cache sets
// Options.OverLimitIndexed.
func IndexOverLimit(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &quotav1alpha1.AllowanceBucket{}, OverLimitIndex, func(o client.Object) []string {
		b, ok := o.(*quotav1alpha1.AllowanceBucket)
		if !ok || !overLimit(&b.Status) {
			return nil
		}
		return []string{b.Spec.ResourceType}
	})
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
