package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// Reserve is the admission path: it holds every requested amount as a
// reservation under the claim's ID, expiring after the TTL, until the
// observer counts the object (and folds the reservation into allocated),
// expires it, or Release (or Undo, for this call's own) removes it. All or
// nothing: if any bucket refuses, what this call took is rolled back and the
// decision is denied. A denied
// decision is not an error; an error means the outcome is unknown or the
// claim is invalid. When a rollback fails the denied Decision is returned
// together with the error.
func (l *Ledger) Reserve(ctx context.Context, claim Claim) (Decision, error) {
	d, _, err := l.ReserveUndoable(ctx, claim)
	return d, err
}

// Taken is what one Reserve call added: the reservations it wrote, known by
// the claim's ID and the call's expiry. It is empty for a denied claim (its
// rollback already removed them) and for a replay (the reservations were
// there before the call). Undo removes exactly these.
type Taken struct {
	claim   Claim
	expires time.Time
	keys    []BucketKey
	// replaced holds, by bucket, the reservation the call replaced with a
	// larger one under the same ID: Undo puts it back.
	replaced map[BucketKey]Reservation
	// leased: admitted inside this process's leases (leases.go), recorded
	// asynchronously.
	leased bool
}

// Empty reports whether the call added nothing.
func (t Taken) Empty() bool { return len(t.keys) == 0 }

// Leased reports whether the call was admitted inside capacity leases
// (leases.go), with no synchronous write.
func (t Taken) Leased() bool { return t.leased }

// ClaimID is the ID the reservations are held under.
func (t Taken) ClaimID() string { return t.claim.ID }

// ReserveUndoable is Reserve that also says what the call added, so that a
// caller who learns later that the object will never be created (the same
// admission review denied it) can give exactly that back with Undo, and
// nothing an earlier call holds under the same ID.
func (l *Ledger) ReserveUndoable(ctx context.Context, claim Claim) (Decision, Taken, error) {
	if d, t, ok := l.reserveLeased(claim); ok {
		return d, t, nil
	}
	d, added, expires, err := l.reserve(ctx, claim)
	if err != nil || !d.Granted || len(added) == 0 {
		return d, Taken{}, err
	}
	claim.Requests = slices.Clone(claim.Requests)
	t := Taken{claim: claim, expires: expires, keys: make([]BucketKey, len(added))}
	for i, a := range added {
		t.keys[i] = a.key
		if r := a.previous(); r != nil {
			if t.replaced == nil {
				t.replaced = map[BucketKey]Reservation{}
			}
			t.replaced[a.key] = *r
		}
	}
	return d, t, nil
}

// reserve is Reserve, returning the targets it added and their expiry.
func (l *Ledger) reserve(ctx context.Context, claim Claim) (Decision, []target, time.Time, error) {
	ts, err := l.targets(claim)
	if err != nil {
		return Decision{}, nil, time.Time{}, err
	}
	// Fail closed: a bucket whose limit cannot be computed admits nothing.
	for _, i := range byName(ts) {
		if err := ts[i].limitErr; err != nil {
			return Decision{}, nil, time.Time{}, fmt.Errorf("claim %q not reserved: the limit of bucket %s is unknown: %w", claim.ID, ts[i].name, err)
		}
	}
	unlock, err := l.lockClaim(ctx, claim.ID)
	if err != nil {
		return Decision{}, nil, time.Time{}, err
	}
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()
	// Microseconds, as the bucket object stores them: the expiry is how a
	// rollback tells this call's reservation from an earlier one's.
	now := l.now().Round(0)
	expires := now.Add(l.ttl).Truncate(time.Microsecond)
	w := write{expires: expires, at: now.Truncate(time.Microsecond), compactAbove: l.compactAbove()}

	results := make([]RequestDecision, len(ts))
	outcomes := make([]takeOutcome, len(ts))
	for i, t := range ts {
		results[i] = RequestDecision{Request: t.req, Bucket: t.name}
	}
	var added []target
	var notAttempted []int
	refused := false
	for _, i := range byName(ts) {
		if refused {
			notAttempted = append(notAttempted, i)
			continue
		}
		ts[i].replaced = new(atomic.Pointer[Reservation])
		out, err := l.takeOne(ctx, claim, ts[i], w)
		var refusal *RefusedError
		switch {
		case errors.As(err, &refusal):
			refused = true
			results[i].Reason = ReasonQuotaExceeded
			results[i].setUsage(Usage{Limit: refusal.Limit, Allocated: refusal.Allocated, Reserved: refusal.Reserved, Available: refusal.Available})
		case err != nil && ctx.Err() != nil:
			// The caller's deadline passed: it is answered at once, and
			// whatever this call wrote is undone behind it, including a
			// write still in flight (ErrOutcomeUnknown), which the store
			// orders before the undo. The claim stays locked until then, so
			// a replay cannot interleave. Nobody is left to return a failed
			// undo to: it is logged (with the logger of the caller's
			// context, else klog's), and the reservations it left hold
			// quota until they expire.
			undo, release := append(added, ts[i]), unlock
			unlock = nil
			go func() {
				defer release()
				if err := l.rollback(ctx, claim.ID, expires, undo); err != nil {
					klog.FromContext(ctx).Error(err, "rolling back a reservation whose caller gave up failed; it holds quota until it expires",
						"claim", claim.ID, "expires", expires)
				}
			}()
			return Decision{}, nil, time.Time{}, err
		case err != nil:
			if rbErr := l.rollback(ctx, claim.ID, expires, added); rbErr != nil {
				err = errors.Join(err, rbErr)
			}
			return Decision{}, nil, time.Time{}, err
		default:
			outcomes[i] = out
			results[i].Reason = ReasonQuotaAvailable
			if out.added {
				added = append(added, ts[i])
			}
		}
	}

	if !refused {
		for i := range results {
			results[i].Granted = true
			results[i].setUsage(outcomes[i].after)
			results[i].setMessage()
		}
		return Decision{Granted: true, Requests: results}, added, expires, nil
	}

	rbErr := l.rollback(ctx, claim.ID, expires, added)
	for i := range results {
		if results[i].Reason == ReasonQuotaAvailable {
			results[i].setUsage(outcomes[i].before)
		}
	}
	for _, i := range notAttempted {
		u, fits, err := l.peek(ctx, claim.ID, ts[i])
		if err != nil {
			return Decision{}, nil, time.Time{}, errors.Join(err, rbErr)
		}
		results[i].setUsage(u)
		results[i].Reason = ReasonQuotaExceeded
		if fits {
			results[i].Reason = ReasonQuotaAvailable
		}
	}
	for i := range results {
		results[i].setMessage()
	}
	return Decision{Granted: false, Requests: results}, nil, time.Time{}, rbErr
}

// write is what every take of one Reserve call writes with, fixed before
// the first: its reservations' expiry, and the time and threshold of a
// compaction (sums.go).
type write struct {
	expires      time.Time
	at           time.Time
	compactAbove int
}

type takeOutcome struct {
	before, after Usage
	added         bool // this call wrote the entry (as opposed to a replay)
}

// takeOne is one bucket's atomic step of a Reserve.
func (l *Ledger) takeOne(ctx context.Context, claim Claim, t target, w write) (takeOutcome, error) {
	var out takeOutcome
	_, err := l.store.Apply(ctx, t.key, func(b *Bucket) error {
		out = takeOutcome{} // mutate may be retried; only the last run counts
		t.replaced.Store(nil)
		// Judge on a read-only view with the call's limit and touch b only
		// once the take succeeds, so a failing mutate leaves b as it was given
		// (a batching store may then skip copying per caller).
		view := *b
		limit := t.limitIn(b)
		view.Limit = limit
		// A claim ID already held is a replay (Gatekeeper's retry, another
		// replica): granted, nothing added, the reservation not extended.
		// Unless it asks for more than is held: two quota constraints
		// counting one object into one bucket with different amounts reserve
		// under the same ID, and the observer counts the larger, so the
		// reservation grows to it, judged as if the smaller one were not
		// there (the numbers a refusal reports are the ones the claim
		// competes for, whichever constraint ran first), and a rollback puts
		// the smaller one back (target.replaced).
		held, isHeld := b.Reservations[claim.ID]
		later := isHeld && laterUpdate(held, t.req)
		grows := isHeld && !later && held.Amount < t.req.Amount
		if grows {
			view.Reservations = withoutClaim(b.Reservations, claim.ID)
		}
		before, err := view.Usage()
		if err != nil {
			return fmt.Errorf("bucket %s: %w", t.name, err)
		}
		out.before, out.after = before, before
		if isHeld && !later && !grows {
			return errUnchanged
		}
		take := t.req.Amount
		need, err := Add(before.Allocated+before.Reserved, take) // the inner sum was checked by Usage
		if err != nil {
			return fmt.Errorf("bucket %s: allocated+reserved+requested: %w", t.name, err)
		}
		if need > limit {
			return &RefusedError{
				Bucket: t.name, Key: t.key, ResourceType: t.req.ResourceType, Requested: t.req.Amount,
				Limit: before.Limit, Allocated: before.Allocated, Reserved: before.Reserved, Available: before.Available,
			}
		}
		available, err := Sub(limit, need)
		if err != nil {
			return fmt.Errorf("bucket %s: %w", t.name, err)
		}
		out.after = Usage{Limit: limit, Allocated: before.Allocated, Reserved: before.Reserved, Available: available}
		next := Reservation{ClaimID: claim.ID, Object: claim.Object, Amount: t.req.Amount, Total: t.req.Total, ExpiresAt: w.expires}
		if isHeld {
			if later {
				// The held growth may not be counted yet: hold both.
				if next.Amount, err = Add(held.Amount, t.req.Amount); err != nil {
					return fmt.Errorf("bucket %s: reserved: %w", t.name, err)
				}
			}
			next.Total = max(next.Total, held.Total)
		}
		// Compacting in the write that adds keeps the bucket bounded
		// however long nobody folds (sums.go).
		compact, err := compacted(b.Reservations, next, w.compactAbove, w.at)
		if err != nil {
			return fmt.Errorf("bucket %s: %w", t.name, err)
		}
		if isHeld {
			t.replaced.Store(&held)
		}
		t.recordNewLimit(b)
		switch {
		case compact != nil:
			b.Reservations = compact
		case b.Reservations == nil:
			b.Reservations = map[string]Reservation{claim.ID: next}
		default:
			b.Reservations[claim.ID] = next
		}
		out.after.Reserved += take
		out.added = true
		return nil
	})
	if err != nil && ctx.Err() != nil {
		// Apply stopped waiting: mutate may still run on the store's
		// goroutine, so out is not this call's to read.
		return takeOutcome{}, err
	}
	if errors.Is(err, errUnchanged) {
		err = nil
	}
	return out, err
}

// laterUpdate reports whether req, asked under the claim id of the held
// reservation of an update's growth, is a later update of the object
// rather than a replay (or a second constraint's amount) of the same one:
// it asks for a larger total. An update's id is <uid>/<generation>/<growth>,
// and a kind without metadata.generation stays at generation 0: an update
// of a to 4 from 1 and the next one, to 7 from 4, share <uid>/0/3. Taken
// for a replay, the second reserved nothing: the bucket held 3 for the 6
// that a was about to add, and a create took the rest (13 of 10). Its
// growth is reserved beside the held one, and the reservation is folded
// only at the later total. Two constraints counting one update into one
// bucket with the same growth and different totals also land here, and
// then hold up to twice the growth until the update is counted:
// conservative, and rare.
func laterUpdate(held Reservation, req Request) bool {
	return held.Total > 0 && req.Total > held.Total
}

// rollback removes the reservations this call added, known by the call's
// expiry. Reservations that were already there (a replay) are left alone:
// the ledger never un-counts something it did not just add. It runs even if ctx was cancelled, since
// abandoning it would leave quota held by a denied claim.
func (l *Ledger) rollback(ctx context.Context, claimID string, expires time.Time, ts []target) error {
	return l.removeOwn(context.WithoutCancel(ctx), claimID, expires, ts)
}

// removeOwn removes, in reverse order, the reservations held under claimID
// in ts's buckets that carry the expiry of the call that added them, and
// leaves any other (an earlier call's, or none) alone.
func (l *Ledger) removeOwn(ctx context.Context, claimID string, expires time.Time, ts []target) error {
	var errs []error
	for i := len(ts) - 1; i >= 0; i-- {
		t := ts[i]
		_, err := l.store.Apply(ctx, t.key, func(b *Bucket) error {
			if r, ok := b.Reservations[claimID]; !ok || !r.ExpiresAt.Equal(expires) {
				return errUnchanged // not this call's reservation
			}
			if prev := t.previous(); prev != nil {
				b.Reservations[claimID] = *prev // this call grew it: back to what it was
			} else {
				delete(b.Reservations, claimID)
			}
			t.recordNewLimit(b)
			return nil
		})
		if err != nil && !errors.Is(err, errUnchanged) {
			errs = append(errs, fmt.Errorf("roll back claim %q in bucket %s: %w", claimID, t.name, err))
		}
	}
	return errors.Join(errs...)
}

// peek reports a bucket's numbers (with the call's limit) and whether the
// request would fit, for requests not attempted after an earlier refusal.
func (l *Ledger) peek(ctx context.Context, claimID string, t target) (Usage, bool, error) {
	b, ok, err := l.store.Get(ctx, t.key)
	if err != nil {
		return Usage{}, false, err
	}
	if !ok {
		b = Bucket{Key: t.key}
	}
	limit := t.limitIn(&b)
	b.Limit = limit
	held, isHeld := b.Reservations[claimID]
	if isHeld && !laterUpdate(held, t.req) {
		if held.Amount >= t.req.Amount {
			u, err := b.Usage()
			if err != nil {
				return Usage{}, false, fmt.Errorf("bucket %s: %w", t.name, err)
			}
			return u, true, nil // held already, as a replay would find it
		}
		b.Reservations = withoutClaim(b.Reservations, claimID) // judged as takeOne judges a growth
	}
	u, err := b.Usage()
	if err != nil {
		return Usage{}, false, fmt.Errorf("bucket %s: %w", t.name, err)
	}
	need, err := Add(u.Allocated+u.Reserved, t.req.Amount)
	return u, err == nil && need <= limit, nil
}

// withoutClaim is reservations without claimID's, copied: the bucket's own
// map is left as it is.
func withoutClaim(reservations map[string]Reservation, claimID string) map[string]Reservation {
	others := maps.Clone(reservations)
	delete(others, claimID)
	return others
}
