package counting

import (
	"maps"
	"slices"
	"time"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// Amounts is what one object counts against each bucket, from the claims
// quota.reserve was asked for while evaluating it (builtins.Recorder). Within
// a claim, requests for the same bucket add up, as the ledger merges them.
// Across claims (several constraints matching the object) the largest
// amount per bucket counts: admission reserves every claim of a CREATE under
// the same id (the object's uid), and a bucket already holding that id
// counts as taken, so one object never counts twice in a bucket. Admission
// keeps whichever claim came first, in an order it does not fix; the
// largest is the deterministic choice. Requests with a non-positive amount
// count nothing (the ledger would refuse them).
func Amounts(claims []ledger.Claim) (map[ledger.BucketKey]int64, error) {
	out := map[ledger.BucketKey]int64{}
	for _, c := range claims {
		sums := map[ledger.BucketKey]int64{}
		for _, r := range c.Requests {
			if r.Amount <= 0 {
				continue
			}
			key := ledger.NewBucketKey(r.Consumer, r.ResourceType, r.Dimensions)
			var err error
			if sums[key], err = ledger.Add(sums[key], r.Amount); err != nil {
				return nil, err
			}
		}
		for key, n := range sums {
			out[key] = max(out[key], n)
		}
	}
	return out, nil
}

// KeepCounting is what an object counts when a constraint cannot count it
// (a ClaimCreationPolicy edited so that it no longer renders for the
// object, an amount that is no longer a number): at least what it counted
// before in every bucket. That constraint's part is unknown, and counting
// it as 0 would hand the tenant quota it still holds; admission denies the
// object's creates and updates with the same message meanwhile. Another
// constraint's part that shrank at the same evaluation is kept too, until
// the object can be counted again: never less than the object uses.
func KeepCounting(before, now map[ledger.BucketKey]int64) map[ledger.BucketKey]int64 {
	if len(before) == 0 {
		return now
	}
	kept := maps.Clone(before)
	for key, amount := range now {
		kept[key] = max(kept[key], amount)
	}
	return kept
}

// Plan is what to do with one bucket's reservations.
type Plan struct {
	// Fold: reservations the bucket's observed figures now count.
	Fold []string
	// Expire: reservations past their expiry whose object the observer has
	// evaluated and does not count in this bucket.
	Expire []string
	// Check: reservations past their expiry whose object the observer has
	// not evaluated; a live read decides (Expired).
	Check []ledger.Reservation
	// Next is the earliest expiry among the reservations kept; zero if none.
	Next time.Time
}

// ReservationClock remembers, on the observer's own clock, when it first saw
// each reservation of each bucket. A reservation's expiresAt is stamped by
// the Gatekeeper replica that made it, on that machine's clock: one running
// behind would have its reservations expire early, while a slower webhook
// may still let their requests through. So a reservation expires only once
// the observer itself has seen it for minAge too (ledger.MinReservationTTL
// in the manager). After a restart every reservation is new to it: it waits
// again (conservative). Not safe for concurrent use.
type ReservationClock struct {
	minAge time.Duration
	first  map[ledger.BucketKey]map[string]time.Time
}

// NewReservationClock returns a clock that has seen nothing.
func NewReservationClock(minAge time.Duration) *ReservationClock {
	return &ReservationClock{minAge: minAge, first: map[ledger.BucketKey]map[string]time.Time{}}
}

// NotBefore records that the bucket holds reservations at now and returns,
// for each, the earliest time the observer may expire it (first seen plus
// the minimum age); it forgets the bucket's reservations that are gone.
func (c *ReservationClock) NotBefore(key ledger.BucketKey, reservations []ledger.Reservation, now time.Time) map[string]time.Time {
	old := c.first[key]
	seen := make(map[string]time.Time, len(reservations))
	notBefore := make(map[string]time.Time, len(reservations))
	for _, r := range reservations {
		first, ok := old[r.ClaimID]
		if !ok {
			first = now
		}
		seen[r.ClaimID], notBefore[r.ClaimID] = first, first.Add(c.minAge)
	}
	if len(seen) == 0 {
		delete(c.first, key)
	} else {
		c.first[key] = seen
	}
	return notBefore
}

// ExpiresAt is when the observer may treat r as expired: its expiresAt, but
// never before notBefore says (from a ReservationClock).
func ExpiresAt(r ledger.Reservation, notBefore map[string]time.Time) time.Time {
	if t, ok := notBefore[r.ClaimID]; ok && t.After(r.ExpiresAt) {
		return t
	}
	return r.ExpiresAt
}

// PlanReservations sorts one bucket's reservations:
//   - fold the reservation "<uid>" of an object counted in the bucket, and
//     "<uid>/<g>/<growth>" of one counted at generation g or later and at
//     the reservation's Total or more (its update is in what was observed;
//     ledger.Reservation.FoldedBy);
//   - keep every other reservation until its expiry (the in-flight window):
//     its expiresAt, but never before notBefore says (from a
//     ReservationClock; nil: no floor);
//   - after expiry, expire it if the observer evaluated its object (at
//     generation g or later) and does not count it here, else ask for a
//     live read.
func PlanReservations(t *Tally, key ledger.BucketKey, reservations []ledger.Reservation, notBefore map[string]time.Time, now time.Time) Plan {
	var p Plan
	for _, r := range reservations {
		uid, g, _ := ledger.ReservationFor(r.ClaimID)
		at := ExpiresAt(r, notBefore)
		expired := !now.Before(at)
		if counted, ok := t.Counted(key, uid); ok && r.FoldedBy(counted) {
			p.Fold = append(p.Fold, r.ClaimID)
			continue
		}
		if !expired {
			if p.Next.IsZero() || at.Before(p.Next) {
				p.Next = at
			}
			continue
		}
		if seen, ok := t.Seen(uid); ok && seen >= g {
			p.Expire = append(p.Expire, r.ClaimID)
			continue
		}
		p.Check = append(p.Check, r)
	}
	slices.Sort(p.Fold)
	slices.Sort(p.Expire)
	return p
}

// With is p and q's decisions together: a bucket's write plans its
// namespace moves' reservations apart from the others (package observer)
// and folds and expires both at once.
func (p Plan) With(q Plan) Plan {
	p.Fold = slices.Sorted(slices.Values(append(p.Fold, q.Fold...)))
	p.Expire = slices.Sorted(slices.Values(append(p.Expire, q.Expire...)))
	p.Check = append(p.Check, q.Check...)
	if p.Next.IsZero() || (!q.Next.IsZero() && q.Next.Before(p.Next)) {
		p.Next = q.Next
	}
	return p
}

// Live is what a live read found for a reservation's object.
type Live struct {
	Exists     bool
	UID        string
	Generation int64
	// Watched: the observer has an informer for the object's kind, so it
	// will evaluate the object soon if it has not yet.
	Watched bool
}

// Expired decides an expired reservation the observer has not seen the
// object of: it goes when the object is absent, is another object (another
// uid), has not reached the reservation's generation (the update was
// rejected), or is of a kind the observer does not watch (nothing will ever
// count it here). An object that exists and is watched keeps its
// reservation until the observer evaluates it.
func Expired(r ledger.Reservation, live Live) bool {
	uid, g, _ := ledger.ReservationFor(r.ClaimID)
	return !live.Exists || live.UID != uid || live.Generation < g || !live.Watched
}
