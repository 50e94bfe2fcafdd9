// Package counting is the one statement of what a live object counts and
// how a bucket's observed figures follow from it: the rule quotakeeper's
// observer writes buckets by, and the rule quotactl's suites and the
// controllers' envtest suite settle their buckets by, so that a suite's
// `usage:` and a cluster's AllowanceBuckets cannot come to disagree.
//
// It guarantees, as pure functions of values handed in (no informers, no
// client, no clock of its own; only package ledger and the standard
// library):
//
//   - what one object counts against each bucket, from the claims its
//     evaluation asked quota.reserve for: requests for one bucket within a
//     claim add up, several constraints' claims on one object count their
//     largest per bucket (Amounts), and an object some constraint cannot
//     count keeps at least what it counted (KeepCounting);
//   - a bucket's figures as exact sums over the objects counted in it:
//     allocated, the per-namespace split and the count, checked against
//     int64 overflow, with the generation and amount each object is counted
//     at (Tally, Observation), kept as objects come, change and go;
//   - which of a bucket's reservations a write folds (those its figures now
//     count, by ledger.Reservation.FoldedBy), keeps (in flight) or expires
//     (past their expiry, their object evaluated and not counted here, on
//     the observer's own clock: ReservationClock), and which need a live
//     read to decide (PlanReservations, Expired).
//
// It is separate from package observer because the observer hosts it
// (informers, queues, a client) and two other counters must not import
// that machinery, nor keep copies of the rule that drift from it.
package counting
