package ledger

import (
	"context"
	"errors"
	"fmt"
)

// Realize records that the claim's object exists: each bucket's reservation
// becomes an allocation of the request's amount. With no reservation (it
// expired) the allocation is added anyway, because the object exists and
// counting it is the truth, even if that puts the bucket over a lowered
// limit. Idempotent. On error some buckets may be realized; retrying finishes
// the rest.
func (l *Ledger) Realize(ctx context.Context, claim Claim) error {
	ts, err := l.targets(claim)
	if err != nil {
		return err
	}
	defer l.lockClaim(claim.ID)()
	for _, i := range byName(ts) {
		t := ts[i]
		_, err := l.store.Apply(ctx, t.key, func(b *Bucket) error {
			r, reserved := b.Reservations[claim.ID]
			_, allocated := b.Allocations[claim.ID]
			if allocated && !reserved {
				return errUnchanged
			}
			if !allocated {
				// Check the new total before touching b: allocated+reserved,
				// less the reservation being moved, plus the allocation.
				u, err := b.Usage()
				if err == nil && reserved {
					u.Reserved, err = Sub(u.Reserved, r.Amount)
				}
				var total int64
				if err == nil {
					total, err = Add(u.Allocated, u.Reserved)
				}
				if err == nil {
					_, err = Add(total, t.req.Amount)
				}
				if err != nil {
					return fmt.Errorf("bucket %s: %w", t.name, err)
				}
			}
			t.setLimit(b)
			delete(b.Reservations, claim.ID)
			if !allocated {
				if b.Allocations == nil {
					b.Allocations = map[string]int64{}
				}
				b.Allocations[claim.ID] = t.req.Amount
			}
			return nil
		})
		if err != nil && !errors.Is(err, errUnchanged) {
			return fmt.Errorf("realize claim %q: %w", claim.ID, err)
		}
	}
	return nil
}

// Release removes the claim's allocation and reservation from every bucket it
// touches. Idempotent; a bucket holding nothing for the claim is not written
// (nor created).
func (l *Ledger) Release(ctx context.Context, claim Claim) error {
	ts, err := l.targets(claim)
	if err != nil {
		return err
	}
	defer l.lockClaim(claim.ID)()
	for _, i := range byName(ts) {
		t := ts[i]
		_, err := l.store.Apply(ctx, t.key, func(b *Bucket) error {
			if !b.holds(claim.ID) {
				return errUnchanged
			}
			delete(b.Allocations, claim.ID)
			delete(b.Reservations, claim.ID)
			t.setLimit(b)
			return nil
		})
		if err != nil && !errors.Is(err, errUnchanged) {
			return fmt.Errorf("release claim %q in bucket %s: %w", claim.ID, t.name, err)
		}
	}
	return nil
}
