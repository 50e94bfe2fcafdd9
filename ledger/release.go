package ledger

import (
	"context"
	"errors"
	"fmt"
)

// Release removes the reservations held under the claim's ID in every bucket
// the claim touches: a claim the caller knows will never be counted (a
// controller-decided claim being deleted). It does not touch allocated,
// which only the observer writes. Idempotent; a bucket holding nothing for
// the claim is not written (nor created).
func (l *Ledger) Release(ctx context.Context, claim Claim) error {
	ts, err := l.targets(claim)
	if err != nil {
		return err
	}
	unlock, err := l.lockClaim(ctx, claim.ID)
	if err != nil {
		return err
	}
	defer unlock()
	for _, i := range byName(ts) {
		t := ts[i]
		_, err := l.store.Apply(ctx, t.key, func(b *Bucket) error {
			if !b.holds(claim.ID) {
				return errUnchanged
			}
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
