package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Expire removes every reservation whose ExpiresAt is at or before now and
// returns how many it removed. Buckets are handled independently: an error on
// one does not stop the others, and all errors are returned joined.
func (l *Ledger) Expire(ctx context.Context) (int, error) {
	now := l.now()
	buckets, err := l.store.List(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	var errs []error
	for _, b := range buckets {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if !hasExpired(b, now) {
			continue
		}
		limit, contribs, err := limitFor(l.grants, b.Key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		removed := 0
		_, err = l.store.Apply(ctx, b.Key, func(b *Bucket) error {
			removed = 0
			for id, r := range b.Reservations {
				if !now.Before(r.ExpiresAt) {
					delete(b.Reservations, id)
					removed++
				}
			}
			if removed == 0 {
				return errUnchanged
			}
			b.Limit, b.Grants = limit, slices.Clone(contribs)
			return nil
		})
		switch {
		case errors.Is(err, errUnchanged):
		case err != nil:
			errs = append(errs, fmt.Errorf("expire in bucket %s: %w", b.Key.Name(), err))
		default:
			total += removed
		}
	}
	return total, errors.Join(errs...)
}

func hasExpired(b Bucket, now time.Time) bool {
	for _, r := range b.Reservations {
		if !now.Before(r.ExpiresAt) {
			return true
		}
	}
	return false
}

// NextExpiry returns the earliest reservation expiry across all buckets, so an
// expiry controller can requeue for exactly then.
func (l *Ledger) NextExpiry(ctx context.Context) (time.Time, bool, error) {
	buckets, err := l.store.List(ctx)
	if err != nil {
		return time.Time{}, false, err
	}
	var next time.Time
	found := false
	for _, b := range buckets {
		if t, ok := NextExpiry(b); ok && (!found || t.Before(next)) {
			next, found = t, true
		}
	}
	return next, found, nil
}
