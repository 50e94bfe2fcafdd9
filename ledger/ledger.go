package ledger

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultReservationTTL is how long a reservation holds quota before Expire
// may remove it: long enough to cover an admission chain and the object's
// creation, short enough that quota held by an object that was never created
// comes back quickly.
const DefaultReservationTTL = 2 * time.Minute

// claimLockStripes bounds the memory of per-claim locking; a collision only
// serializes two unrelated claims, it never affects correctness.
const claimLockStripes = 256

// Option configures a Ledger.
type Option func(*Ledger)

// WithClock replaces time.Now, so tests can drive expiry deterministically.
func WithClock(now func() time.Time) Option { return func(l *Ledger) { l.now = now } }

// WithReservationTTL sets how long reservations live; it must be positive.
func WithReservationTTL(ttl time.Duration) Option { return func(l *Ledger) { l.ttl = ttl } }

// Ledger owns quota arithmetic over a Store and a GrantSource.
type Ledger struct {
	store  Store
	grants GrantSource
	now    func() time.Time
	ttl    time.Duration

	// claimLocks serialize calls for the same claim id within this process,
	// so two concurrent replays of one claim cannot interleave a take with
	// the other's rollback and end up half-held.
	seed       maphash.Seed
	claimLocks [claimLockStripes]sync.Mutex
}

// New returns a Ledger. It panics on a nil store or grant source, a nil clock
// or a non-positive TTL: those are programming errors, not runtime conditions.
func New(store Store, grants GrantSource, opts ...Option) *Ledger {
	l := &Ledger{store: store, grants: grants, now: time.Now, ttl: DefaultReservationTTL, seed: maphash.MakeSeed()}
	for _, opt := range opts {
		opt(l)
	}
	switch {
	case store == nil:
		panic("ledger.New: nil Store")
	case grants == nil:
		panic("ledger.New: nil GrantSource")
	case l.now == nil:
		panic("ledger.New: nil clock")
	case l.ttl <= 0:
		panic(fmt.Sprintf("ledger.New: reservation TTL must be positive, got %v", l.ttl))
	}
	return l
}

func (l *Ledger) lockClaim(id string) (unlock func()) {
	m := &l.claimLocks[maphash.String(l.seed, id)%claimLockStripes]
	m.Lock()
	return m.Unlock
}

type entryKind int

const (
	kindReservation entryKind = iota
	kindAllocation
)

// target is one distinct bucket a claim touches: the merged request and the
// limit computed once for the whole call, so every bucket of one decision is
// judged against the same view of the grants.
type target struct {
	key    BucketKey
	name   string
	req    Request
	limit  int64
	grants []GrantContribution
}

func (t target) setLimit(b *Bucket) {
	b.Limit = t.limit
	b.Grants = slices.Clone(t.grants)
}

// targets validates the claim, merges requests for the same bucket (summing
// amounts with overflow checking) and computes each bucket's limit. It writes
// nothing, so an invalid claim changes nothing.
func (l *Ledger) targets(claim Claim) ([]target, error) {
	if err := validateClaim(claim); err != nil {
		return nil, err
	}
	var ts []target
	pos := make(map[BucketKey]int, len(claim.Requests))
	var errs []FieldError
	for i, r := range claim.Requests {
		key := NewBucketKey(r.Consumer, r.ResourceType, r.Dimensions)
		if j, ok := pos[key]; ok {
			sum, err := checkedAdd(ts[j].req.Amount, r.Amount)
			if err != nil {
				errs = append(errs, FieldError{
					Field:  fmt.Sprintf("requests[%d].amount", i),
					Detail: fmt.Sprintf("sum with earlier requests for the same bucket: %v", err),
					Err:    err,
				})
				continue
			}
			ts[j].req.Amount = sum
			continue
		}
		pos[key] = len(ts)
		r.Dimensions = maps.Clone(r.Dimensions)
		ts = append(ts, target{key: key, name: key.Name(), req: r})
	}
	if len(errs) > 0 {
		return nil, &ValidationError{Errors: errs}
	}
	for i := range ts {
		var err error
		if ts[i].limit, ts[i].grants, err = limitFor(l.grants, ts[i].key); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// byName is the fixed order buckets are taken in. Any fixed order would keep
// two stores consistent; Name order is also the order a Kubernetes store sees
// its objects in.
func byName(ts []target) []int {
	idx := make([]int, len(ts))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(ts[a].name, ts[b].name) })
	return idx
}

// Reserve is the admission path: it holds every requested amount as a
// reservation that expires after the TTL unless Realize turns it into an
// allocation. All or nothing: if any bucket refuses, what this call took is
// rolled back and the decision is denied. A denied decision is not an error;
// an error means the outcome is unknown or the claim is invalid. When a
// rollback fails the denied Decision is returned together with the error.
func (l *Ledger) Reserve(ctx context.Context, claim Claim) (Decision, error) {
	return l.take(ctx, claim, kindReservation)
}

// Allocate is Reserve for claims decided by a controller for objects that
// already exist: it records allocations directly.
func (l *Ledger) Allocate(ctx context.Context, claim Claim) (Decision, error) {
	return l.take(ctx, claim, kindAllocation)
}

type takeOutcome struct {
	before, after Usage
	added         bool // this call wrote the entry (as opposed to a replay)
}

func (l *Ledger) take(ctx context.Context, claim Claim, kind entryKind) (Decision, error) {
	ts, err := l.targets(claim)
	if err != nil {
		return Decision{}, err
	}
	defer l.lockClaim(claim.ID)()
	expires := l.now().Round(0).Add(l.ttl)

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
		out, err := l.takeOne(ctx, claim, ts[i], kind, expires)
		var refusal *RefusedError
		switch {
		case errors.As(err, &refusal):
			refused = true
			results[i].Reason = ReasonQuotaExceeded
			results[i].setUsage(Usage{Limit: refusal.Limit, Allocated: refusal.Allocated, Reserved: refusal.Reserved, Available: refusal.Available})
		case err != nil:
			if rbErr := l.rollback(ctx, claim.ID, kind, added); rbErr != nil {
				err = errors.Join(err, rbErr)
			}
			return Decision{}, err
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
		return Decision{Granted: true, Requests: results}, nil
	}

	rbErr := l.rollback(ctx, claim.ID, kind, added)
	for i := range results {
		if results[i].Reason == ReasonQuotaAvailable {
			results[i].setUsage(outcomes[i].before)
		}
	}
	for _, i := range notAttempted {
		u, fits, err := l.peek(ctx, claim.ID, ts[i])
		if err != nil {
			return Decision{}, errors.Join(err, rbErr)
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
	return Decision{Granted: false, Requests: results}, rbErr
}

// takeOne is one bucket's atomic step of a take.
func (l *Ledger) takeOne(ctx context.Context, claim Claim, t target, kind entryKind, expires time.Time) (takeOutcome, error) {
	var out takeOutcome
	_, err := l.store.Apply(ctx, t.key, func(b *Bucket) error {
		out = takeOutcome{} // mutate may be retried; only the last run counts
		t.setLimit(b)
		before, err := b.Usage()
		if err != nil {
			return fmt.Errorf("bucket %s: %w", t.name, err)
		}
		out.before, out.after = before, before
		if b.holds(claim.ID) {
			return errUnchanged
		}
		need, err := checkedAdd(before.Allocated+before.Reserved, t.req.Amount) // the inner sum was checked by Usage
		if err != nil {
			return fmt.Errorf("bucket %s: allocated+reserved+requested: %w", t.name, err)
		}
		if need > b.Limit {
			return &RefusedError{
				Bucket: t.name, Key: t.key, ResourceType: t.req.ResourceType, Requested: t.req.Amount,
				Limit: before.Limit, Allocated: before.Allocated, Reserved: before.Reserved, Available: before.Available,
			}
		}
		switch kind {
		case kindReservation:
			if b.Reservations == nil {
				b.Reservations = map[string]Reservation{}
			}
			b.Reservations[claim.ID] = Reservation{ClaimID: claim.ID, Object: claim.Object, Amount: t.req.Amount, ExpiresAt: expires}
		case kindAllocation:
			if b.Allocations == nil {
				b.Allocations = map[string]int64{}
			}
			b.Allocations[claim.ID] = t.req.Amount
		}
		if out.after, err = b.Usage(); err != nil {
			return fmt.Errorf("bucket %s: %w", t.name, err)
		}
		out.added = true
		return nil
	})
	if errors.Is(err, errUnchanged) {
		err = nil
	}
	return out, err
}

// rollback removes the entries this call added. Entries that were already
// there (a replay) are left alone: the ledger never un-counts something it did
// not just add. It runs even if ctx was cancelled, since abandoning it would
// leave quota held by a denied claim.
func (l *Ledger) rollback(ctx context.Context, claimID string, kind entryKind, ts []target) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	for i := len(ts) - 1; i >= 0; i-- {
		t := ts[i]
		_, err := l.store.Apply(ctx, t.key, func(b *Bucket) error {
			switch kind {
			case kindReservation:
				if _, ok := b.Reservations[claimID]; !ok {
					return errUnchanged
				}
				delete(b.Reservations, claimID)
			case kindAllocation:
				if _, ok := b.Allocations[claimID]; !ok {
					return errUnchanged
				}
				delete(b.Allocations, claimID)
			}
			t.setLimit(b)
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
	b.Limit = t.limit
	u, err := b.Usage()
	if err != nil {
		return Usage{}, false, fmt.Errorf("bucket %s: %w", t.name, err)
	}
	if b.holds(claimID) {
		return u, true, nil
	}
	need, err := checkedAdd(u.Allocated+u.Reserved, t.req.Amount)
	return u, err == nil && need <= t.limit, nil
}

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
			_, reserved := b.Reservations[claim.ID]
			_, allocated := b.Allocations[claim.ID]
			if allocated && !reserved {
				return errUnchanged
			}
			t.setLimit(b)
			delete(b.Reservations, claim.ID)
			if !allocated {
				if b.Allocations == nil {
					b.Allocations = map[string]int64{}
				}
				b.Allocations[claim.ID] = t.req.Amount
			}
			if _, err := b.Usage(); err != nil {
				return fmt.Errorf("bucket %s: %w", t.name, err)
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

// Refresh rewrites one bucket's limit and contributions from the current
// grants; the grant controller calls it when grants change. Lowering a limit
// never touches existing entries: it only blocks new ones. The bucket is not
// written when nothing changed.
func (l *Ledger) Refresh(ctx context.Context, key BucketKey) (Bucket, error) {
	limit, contribs, err := limitFor(l.grants, key)
	if err != nil {
		return Bucket{}, err
	}
	var current Bucket
	b, err := l.store.Apply(ctx, key, func(b *Bucket) error {
		if b.Limit == limit && slices.Equal(b.Grants, contribs) {
			current = b.DeepCopy()
			return errUnchanged
		}
		b.Limit, b.Grants = limit, slices.Clone(contribs)
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return current, nil
	}
	return b, err
}

// Usage reads a bucket's numbers without writing. An existing bucket reports
// its stored limit; a bucket that does not exist yet reports the limit the
// current grants would give it.
func (l *Ledger) Usage(ctx context.Context, key BucketKey) (Usage, error) {
	b, ok, err := l.store.Get(ctx, key)
	if err != nil {
		return Usage{}, err
	}
	if !ok {
		limit, _, err := limitFor(l.grants, key)
		if err != nil {
			return Usage{}, err
		}
		return Usage{Limit: limit, Available: limit}, nil
	}
	return b.Usage()
}
