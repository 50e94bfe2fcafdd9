package ledger

import (
	"context"
	"slices"
	"strings"
)

// The ledger reads buckets one at a time (Store has no List); tests read
// them all to compare a store's whole state.

// List returns copies of every bucket sorted by Name, the order a Kubernetes
// list would return them in. Each bucket is read atomically; the list as a
// whole is not a snapshot, just as an informer's is not.
func (s *MemoryStore) List(ctx context.Context) ([]Bucket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type named struct {
		name   string
		bucket Bucket
	}
	var all []named
	s.buckets.Range(func(_, v any) bool {
		e := v.(*memEntry)
		e.mu.Lock()
		if e.exists {
			all = append(all, named{e.bucket.Key.Name(), e.bucket.DeepCopy()})
		}
		e.mu.Unlock()
		return true
	})
	slices.SortFunc(all, func(a, b named) int { return strings.Compare(a.name, b.name) })
	out := make([]Bucket, len(all))
	for i, n := range all {
		out[i] = n.bucket
	}
	return out, nil
}
