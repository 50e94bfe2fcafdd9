// STANDIN: replaced by part A
//
// This file stands in for part A's ledger/observe.go so that the observer
// (part B) compiles and its tests run before A is merged. It removes the
// listed reservations and recomputes the limit; it does not store the
// observed figures (the Bucket on this branch has no fields for them).

package ledger

import (
	"context"
	"errors"
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
// write; writes nothing when nothing changes.
func (l *Ledger) Observe(ctx context.Context, key BucketKey, obs Observation) (Bucket, error) {
	limit, contribs, err := limitFor(l.grants, key)
	if err != nil {
		return Bucket{}, err
	}
	var current Bucket
	b, err := l.store.Apply(ctx, key, func(b *Bucket) error {
		changed := b.Limit != limit || !slices.Equal(b.Grants, contribs)
		next := b.DeepCopy()
		for _, id := range slices.Concat(obs.Fold, obs.Expire) {
			if _, ok := next.Reservations[id]; ok {
				delete(next.Reservations, id)
				changed = true
			}
		}
		if !changed {
			current = b.DeepCopy()
			return errUnchanged
		}
		next.Limit, next.Grants = limit, slices.Clone(contribs)
		*b = next
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return current, nil
	}
	return b, err
}
