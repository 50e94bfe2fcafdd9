package ledger

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultReservationTTL is how long a reservation holds quota before it may
// be released as expired: long enough to cover an admission chain and the object's
// creation, short enough that quota held by an object that was never created
// comes back quickly.
const DefaultReservationTTL = 2 * time.Minute

// MinReservationTTL is the shortest TTL an admission reservation may have:
// the longest timeout the API server allows a webhook (30 s), during which
// a slower webhook after Gatekeeper's may still let the request through,
// plus a margin for the write that follows. A shorter one expired the
// reservation of an update still in flight, and the object then counted
// beside another's quota (issue 22).
const MinReservationTTL = 35 * time.Second

// claimLockStripes bounds the memory of per-claim locking; a collision only
// serializes two unrelated claims, it never affects correctness.
const claimLockStripes = 256

// Option configures a Ledger.
type Option func(*Ledger)

// WithClock replaces time.Now, so tests can drive expiry deterministically.
func WithClock(now func() time.Time) Option { return func(l *Ledger) { l.now = now } }

// WithReservationTTL sets how long reservations live; it must be positive.
func WithReservationTTL(ttl time.Duration) Option { return func(l *Ledger) { l.ttl = ttl } }

// WithCompactAbove sets how many compactable reservations (Compactable) a
// bucket may hold before the reserving write compacts the oldest into a sum
// (sums.go): 0 is DefaultCompactAbove, a negative value never compacts.
func WithCompactAbove(n int) Option { return func(l *Ledger) { l.compact = n } }

// Ledger owns quota arithmetic over a Store and a GrantSource.
type Ledger struct {
	store  Store
	grants GrantSource
	now    func() time.Time
	ttl    time.Duration
	// compact is WithCompactAbove's value (read through compactAbove).
	compact int
	// leases is the capacity lease holder (WithLeases); nil: off.
	leases *leases

	// claimLocks serialize calls for the same claim id within this process,
	// so two concurrent replays of one claim cannot interleave a take with
	// the other's rollback and end up half-held. Each is a one-slot channel
	// rather than a mutex so that waiting for it honours the caller's
	// deadline.
	seed       maphash.Seed
	claimLocks [claimLockStripes]chan struct{}
}

// New returns a Ledger. It panics on a nil store or grant source, a nil clock
// or a non-positive TTL: those are programming errors, not runtime conditions.
func New(store Store, grants GrantSource, opts ...Option) *Ledger {
	l := &Ledger{store: store, grants: grants, now: time.Now, ttl: DefaultReservationTTL, seed: maphash.MakeSeed()}
	for _, opt := range opts {
		opt(l)
	}
	for i := range l.claimLocks {
		l.claimLocks[i] = make(chan struct{}, 1)
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

// lockClaim takes the claim's lock, or gives up when ctx ends.
func (l *Ledger) lockClaim(ctx context.Context, id string) (unlock func(), err error) {
	lock := l.claimLocks[maphash.String(l.seed, id)%claimLockStripes]
	select {
	case lock <- struct{}{}:
		return func() { <-lock }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("claim %q: waiting for another call on it: %w", id, context.Cause(ctx))
	}
}

// target is one distinct bucket a claim touches: the merged request and the
// limit computed once for the whole call, so every bucket of one decision is
// judged against the same view of the grants. limitErr says why the limit
// could not be computed (grants summing past int64): Reserve then refuses,
// while Release and rollback still remove reservations and leave the
// bucket's limit as it was, so cleanup never waits on the grants.
type target struct {
	key      BucketKey
	name     string
	req      Request
	limit    int64
	grants   []GrantContribution
	limitErr error
	// replaced is the reservation this call's take replaced under the same
	// claim ID, when it asked for more than that one held (takeOne); its
	// rollback puts it back. Set by the take's mutate, which may run on the
	// store's goroutine after the caller stopped waiting, so it is read
	// only inside a later mutate of the same bucket, which the store orders
	// after it.
	replaced *atomic.Pointer[Reservation]
}

// previous is the reservation this call's take replaced, or nil.
func (t target) previous() *Reservation {
	if t.replaced == nil {
		return nil
	}
	return t.replaced.Load()
}

// limitIn is the limit a reserving write decides b against, given the one
// the writer's grant cache gives (cached): the lower of that and the one b
// records (limitRecorded). A replica whose cache has not yet seen a lowered
// grant is held to the limit the bucket already records, and a replica that
// has seen it holds everyone to it at once; a raised grant binds once the
// bucket records it (the grant controller's Refresh, on the leader, within
// milliseconds of the change) and the writer's cache has it.
func limitIn(b *Bucket, cached int64) int64 {
	if !limitRecorded(b) {
		return cached
	}
	return min(cached, b.Limit)
}

// recordNewLimit records limit and contribs on a bucket that records no
// limit yet (the first write of a bucket the grant controller has not
// created). Only the leader's Refresh and Observe rewrite a recorded limit:
// a writer with a stale grant cache must not put a lowered limit back up
// (the grant-change window, docs/design/model.md).
func recordNewLimit(b *Bucket, limit int64, contribs []GrantContribution) {
	if limitRecorded(b) {
		return
	}
	b.Limit = limit
	b.Grants = slices.Clone(contribs)
}

// limitIn is limitIn with the call's limit.
func (t target) limitIn(b *Bucket) int64 { return limitIn(b, t.limit) }

// recordNewLimit is recordNewLimit with the call's limit; an unknown limit
// records nothing.
func (t target) recordNewLimit(b *Bucket) {
	if t.limitErr == nil {
		recordNewLimit(b, t.limit, t.grants)
	}
}

// limitRecorded reports whether some write recorded a limit on b: a grant
// contributed, or the limit is above zero. A bucket all of whose grants are
// gone records none, as a new one, so its first reserving write decides by
// its own cache: that one case keeps the window.
func limitRecorded(b *Bucket) bool {
	return b.Grants != nil || b.Limit != 0
}

// targets validates the claim, merges requests for the same bucket (summing
// amounts with overflow checking) and computes each bucket's limit, recording
// a limit that cannot be computed in the target rather than failing: whether
// that matters is the caller's to decide. It writes nothing, so an invalid
// claim changes nothing.
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
			sum, err := Add(ts[j].req.Amount, r.Amount)
			if err != nil {
				errs = append(errs, FieldError{
					Field:  fmt.Sprintf("requests[%d].amount", i),
					Detail: fmt.Sprintf("sum with earlier requests for the same bucket: %v", err),
					Err:    err,
				})
				continue
			}
			ts[j].req.Amount = sum
			// Parts of one claim in one bucket count together, as
			// the observer sums them (overflow: the amounts already
			// cannot be held).
			ts[j].req.Total, _ = Add(ts[j].req.Total, r.Total)
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
		ts[i].limit, ts[i].grants, ts[i].limitErr = limitFor(l.grants, ts[i].key)
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

// Refresh rewrites one bucket's limit and contributions from the current
// grants; the grant controller calls it when grants change. Lowering a limit
// never touches usage or reservations: it only blocks new ones. The bucket is not
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

// AnyOverLimit reports whether some bucket of the resource type is over its
// limit. A store that cannot tell cheaply (no OverLimitFinder) answers yes,
// so that callers look at each bucket themselves.
func (l *Ledger) AnyOverLimit(ctx context.Context, resourceType string) (bool, error) {
	f, ok := l.store.(OverLimitFinder)
	if !ok {
		return true, nil
	}
	return f.AnyOverLimit(ctx, resourceType)
}
