package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
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
			t.recordNewLimit(b)
			return nil
		})
		if err != nil && !errors.Is(err, errUnchanged) {
			return fmt.Errorf("release claim %q in bucket %s: %w", claim.ID, t.name, err)
		}
	}
	return nil
}

// Undo removes what one Reserve call added (t, from ReserveUndoable): each
// reservation it wrote, if the bucket still holds it under the claim's ID
// with that call's expiry. A reservation an earlier call holds under the
// same ID, one the observer has folded or expired, or one a later call
// wrote after this one's was removed, is left alone; so is allocated. The
// admission path calls it when the review that reserved ends in a denial,
// so the quota comes back at once rather than at the TTL. Unlike a denied
// claim's rollback it honours ctx: what a failed or abandoned Undo leaves
// is an ordinary reservation, which expires. Idempotent.
func (l *Ledger) Undo(ctx context.Context, t Taken) error {
	if t.Empty() {
		return nil
	}
	if t.leased {
		if t.keys = l.undoLeased(t); len(t.keys) == 0 {
			return nil
		}
	}
	// Undoing rewrites no recorded limit: only the leader's Refresh and
	// Observe do (recordNewLimit).
	all, err := l.targets(t.claim)
	if err != nil {
		return err
	}
	ts := make([]target, 0, len(t.keys))
	for _, i := range byName(all) {
		if slices.Contains(t.keys, all[i].key) {
			target := all[i]
			target.replaced = new(atomic.Pointer[Reservation])
			if r, ok := t.replaced[target.key]; ok {
				target.replaced.Store(&r)
			}
			ts = append(ts, target)
		}
	}
	unlock, err := l.lockClaim(ctx, t.claim.ID)
	if err != nil {
		return err
	}
	defer unlock()
	// removeOwn goes through ts in reverse: the reverse of the order taken.
	return l.removeOwn(ctx, t.claim.ID, t.expires, ts)
}
