package ledger

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sums bound a bucket while nobody folds its reservations.
//
// Admission records every create as a reservation under the object's uid,
// and only the observer (in the manager) removes it. While the manager is
// away a busy bucket gathers reservations without end and passes etcd's
// object size limit, after which every admission on it fails. What a
// create must leave behind until its object is counted is only how much it
// reserved, not which object: so once a bucket holds more than CompactAbove
// (WithCompactAbove) compactable reservations, the reserving write replaces
// the oldest of them by one sum, and merges the sums into one new sum when
// there are more than MaxSums. The bucket then holds at most CompactAbove
// compactable reservations plus MaxSums sums however long the manager is
// away (docs/design/leases.md).
//
// A sum is stored as an ordinary Reservation, so reserved, available and
// the limit check count it like any other:
//   - ClaimID "sum/<n>" (IsSum), n a decimal number never used before in the
//     bucket (sumID);
//   - Amount, the total of the amounts it holds;
//   - Total 0;
//   - ExpiresAt, the time it was written, for operators only: nothing expires
//     a sum by it;
//   - Object, SumObject: how many creates it holds.
//
// A sum is never folded by an object's uid (Reservation.FoldedBy), never
// expired by a TTL and never changed once written: it is freed only by the
// observer naming it in Observation.Fold, once it has passed a barrier
// behind which every create it holds is counted or will never exist. The
// observer times that barrier from when it first saw the sum's id, which
// is why a merge writes a new id rather than adding to an existing sum.
//
// The cost is precision, never safety: an object behind a sum is counted in
// allocated and in the sum until the sum is freed, so near the limit a
// create may be refused that would fit.
const SumPrefix = "sum/"

// MaxSums is how many sums a bucket holds at most after a compaction: one
// more, and the reserving write merges them all into one new sum.
const MaxSums = 4

// DefaultCompactAbove is the number of compactable reservations a bucket may
// hold before a reserving write compacts them (WithCompactAbove). The
// observer folds a create within about a second, so at a few hundred
// creates a second a bucket reaches it only while the observer is away or
// far behind; at about 100 bytes a reservation it keeps a bucket's status
// under 64 KiB (issue 23's bound), which every write rewrites, far below
// etcd's 1.5 MiB object limit.
const DefaultCompactAbove = 500

// sumGroup and sumKind make up the object a sum names: not an object of the
// API, a label saying what the entry is. Its name is the number of creates
// the sum holds, and its uid the id's first segment ("sum"), which the
// bucket object's string form derives from the id, so a sum's reservation
// round-trips through it unchanged and without a "uid=" field.
const (
	sumGroup = "quota.miloapis.com"
	sumKind  = "ReservationSum"
	sumUID   = "sum"
)

// IsSum reports whether a reservation id names a sum.
func IsSum(id string) bool { return strings.HasPrefix(id, SumPrefix) }

// SumObject is the object of a sum of count creates.
func SumObject(count int64) ObjectRef {
	return ObjectRef{APIGroup: sumGroup, Kind: sumKind, Name: strconv.FormatInt(count, 10), UID: sumUID}
}

// SumCount is how many creates the sum r holds (0 if r is not one, or its
// count is unreadable: it is only for operators).
func SumCount(r Reservation) int64 {
	if !IsSum(r.ClaimID) || r.Object.Kind != sumKind {
		return 0
	}
	n, err := strconv.ParseInt(r.Object.Name, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Compactable reports whether r may be compacted into a sum: only a create
// made by admission, whose object reaches the API server within its request
// deadline or never does, which is what the observer's barrier relies on.
// Such a reservation has a bare uid for id and an expiry. Excluded:
//   - ids with a "/": an update's growth ("<uid>/<generation>/<growth>"),
//     folded only once counted at its generation and total, a namespace
//     move (NamespaceMoveID), and sums themselves;
//   - objects of the quota.miloapis.com group: an Allocation claim's
//     ResourceClaim (reserved under the claim's bare uid) waits on the
//     claim controller, not on a request deadline, and a delegated
//     ResourceGrant's hand-out (the grant's bare uid) is folded by the
//     delegation controller;
//   - a reservation with no expiry, which no admission writes.
func Compactable(r Reservation) bool {
	return !strings.Contains(r.ClaimID, "/") && r.Object.APIGroup != sumGroup && !r.ExpiresAt.IsZero()
}

// compactAbove is the threshold a Ledger compacts at; negative disables.
func (l *Ledger) compactAbove() int {
	if l.compact == 0 {
		return DefaultCompactAbove
	}
	return l.compact
}

// compacted is the reservations of a bucket that holds res with added in
// (under added.ClaimID, replacing any there), after the reserving write's
// compaction at time at: nil when nothing compacts. res is not modified.
// The reservation the write adds is never compacted, so that the write's own
// rollback or Undo still finds it. An amount or count that overflows skips
// the compaction (the reservation is not failed for it); a compaction that
// would change the reserved total is a bug and an error, which fails the
// write closed.
func compacted(res map[string]Reservation, added Reservation, above int, at time.Time) (map[string]Reservation, error) {
	if above < 0 || countCompactable(res, added) <= above {
		return nil, nil
	}
	out := make(map[string]Reservation, len(res)+1)
	for id, r := range res {
		out[id] = r
	}
	out[added.ClaimID] = added
	if ok, err := compact(out, added.ClaimID, above, at); !ok || err != nil {
		return nil, err
	}
	return out, nil
}

// countCompactable is how many compactable reservations res holds with
// added in.
func countCompactable(res map[string]Reservation, added Reservation) int {
	n := 0
	if Compactable(added) {
		n++
	}
	for id, r := range res {
		if id != added.ClaimID && Compactable(r) {
			n++
		}
	}
	return n
}

// compact compacts res in place when it holds more than above compactable
// reservations besides keep's (which is never compacted), and reports
// whether it did: the oldest go into one new sum, and the sums into one when
// there are more than MaxSums.
func compact(res map[string]Reservation, keep string, above int, at time.Time) (bool, error) {
	var oldest []Reservation
	n := 0
	for id, r := range res {
		if Compactable(r) {
			n++
			if id != keep {
				oldest = append(oldest, r)
			}
		}
	}
	if above < 0 || n <= above {
		return false, nil
	}
	before, err := reservedOf(res)
	if err != nil {
		return false, nil
	}
	slices.SortFunc(oldest, func(a, b Reservation) int {
		if c := a.ExpiresAt.Compare(b.ExpiresAt); c != 0 {
			return c
		}
		return strings.Compare(a.ClaimID, b.ClaimID)
	})
	oldest = oldest[:min(len(oldest), n-above/2)]
	if len(oldest) == 0 || !replaceBySum(res, oldest, at) {
		return false, nil
	}
	var sums []Reservation
	for id, r := range res {
		if IsSum(id) {
			sums = append(sums, r)
		}
	}
	if len(sums) > MaxSums {
		replaceBySum(res, sums, at) // cannot overflow: before, the total of every amount, fits
	}
	after, err := reservedOf(res)
	switch {
	case err != nil:
		return false, fmt.Errorf("compaction changed the reserved total from %d: not written: %w", before, err)
	case after != before:
		return false, fmt.Errorf("compaction changed the reserved total from %d to %d: not written", before, after)
	}
	return true, nil
}

// replaceBySum replaces rs in res by one new sum of their amounts and
// counts (a create counts one, a sum its count), written at at. It changes
// nothing and reports false if a total overflows.
func replaceBySum(res map[string]Reservation, rs []Reservation, at time.Time) bool {
	var amount, count int64
	for _, r := range rs {
		var err error
		if amount, err = Add(amount, r.Amount); err != nil {
			return false
		}
		n := int64(1)
		if IsSum(r.ClaimID) {
			n = SumCount(r)
		}
		if count, err = Add(count, n); err != nil {
			return false
		}
	}
	id := sumID(res, at)
	for _, r := range rs {
		delete(res, r.ClaimID)
	}
	res[id] = Reservation{ClaimID: id, Object: SumObject(count), Amount: amount, ExpiresAt: at}
	return true
}

// sumID is the id of a new sum written at at into a bucket holding res:
// "sum/<n>", n above every sum's in the bucket and not below at in
// microseconds since the epoch. One above the largest alone would reuse an
// id once every sum is freed, and an observer whose copy of the bucket lags
// could then take the new sum for the freed one, first seen long ago, and
// free it before its barrier; the clock keeps n rising across that. (A
// writer whose clock is behind another's by more than the barrier's wait
// could still meet a freed id; replicas' clocks are kept far closer.)
func sumID(res map[string]Reservation, at time.Time) string {
	next := at.UnixMicro()
	for id := range res {
		if s, ok := strings.CutPrefix(id, SumPrefix); ok {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= next && n < math.MaxInt64 {
				next = n + 1
			}
		}
	}
	return SumPrefix + strconv.FormatInt(next, 10)
}

// reservedOf is the checked total of res (Bucket.Reserved).
func reservedOf(res map[string]Reservation) (int64, error) {
	return Bucket{Reservations: res}.Reserved()
}
