package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Fix is what Repair changes in one bucket. The caller knows the truth the
// bucket should agree with (the controllers read it from the granted
// ResourceClaims); the ledger applies it in one atomic write.
type Fix struct {
	// Allocations maps claim id to the amount that must be allocated: the
	// claims the caller knows are granted in this bucket. A missing entry is
	// added, a wrong amount corrected, and a reservation under the same id is
	// dropped, as Realize would.
	Allocations map[string]int64
	// Remove lists allocation ids to drop: entries the caller saw in the
	// bucket with no claim behind them. Naming only ids it observed (rather
	// than "everything else") is what keeps a repair from removing an
	// allocation made after the caller looked.
	Remove []string
	// Rewrite writes the bucket even when its entries and limit are already
	// right, so a store re-renders what it derives from them (totals, counts,
	// conditions) after someone edited those by hand.
	Rewrite bool
}

// Repair makes one bucket agree with fix, recomputing its limit from the
// grants, in one atomic write. Reservations other than those replaced by an
// allocation are left alone: they have no record outside the bucket, and
// expiry returns them. Without Rewrite, a bucket that already agrees is not
// written. An invalid fix, or one whose totals would overflow, writes
// nothing.
func (l *Ledger) Repair(ctx context.Context, key BucketKey, fix Fix) (Bucket, error) {
	if err := validateFix(fix); err != nil {
		return Bucket{}, err
	}
	limit, contribs, err := limitFor(l.grants, key)
	if err != nil {
		return Bucket{}, err
	}
	var current Bucket
	b, err := l.store.Apply(ctx, key, func(b *Bucket) error {
		changed := b.Limit != limit || !slices.Equal(b.Grants, contribs)
		next := b.DeepCopy()
		for _, id := range fix.Remove {
			if _, ok := next.Allocations[id]; ok {
				delete(next.Allocations, id)
				changed = true
			}
		}
		for id, amount := range fix.Allocations {
			if _, ok := next.Reservations[id]; ok {
				delete(next.Reservations, id)
				changed = true
			}
			if have, ok := next.Allocations[id]; !ok || have != amount {
				if next.Allocations == nil {
					next.Allocations = map[string]int64{}
				}
				next.Allocations[id] = amount
				changed = true
			}
		}
		if !changed && !fix.Rewrite {
			current = b.DeepCopy()
			return errUnchanged
		}
		next.Limit, next.Grants = limit, slices.Clone(contribs)
		if _, err := next.Usage(); err != nil {
			return fmt.Errorf("repair bucket %s: %w", key.Name(), err)
		}
		*b = next
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return current, nil
	}
	return b, err
}

func validateFix(fix Fix) error {
	var errs []FieldError
	for _, id := range slices.Sorted(maps.Keys(fix.Allocations)) {
		if id == "" {
			errs = append(errs, FieldError{Field: "allocations", Detail: "claim id must not be empty"})
		}
		if amount := fix.Allocations[id]; amount <= 0 {
			errs = append(errs, FieldError{Field: fmt.Sprintf("allocations[%s]", id), Detail: fmt.Sprintf("must be positive, got %d", amount)})
		}
	}
	for i, id := range fix.Remove {
		if _, ok := fix.Allocations[id]; ok {
			errs = append(errs, FieldError{Field: fmt.Sprintf("remove[%d]", i), Detail: fmt.Sprintf("claim id %q is also in allocations", id)})
		}
	}
	if len(errs) > 0 {
		return &ValidationError{Errors: errs}
	}
	return nil
}
