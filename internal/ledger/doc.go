// Package ledger owns quota arithmetic for quotakeeper and nothing else.
// Admission builtins, the observer, controllers and the CLI are thin adapters
// over it.
//
// # Observed usage and the in-flight window
//
// A bucket's allocated is observed usage: the sum, over the live objects
// counted against the bucket, of what each counts. The ledger does not count
// objects itself; the observer does, and writes its figures with Observe
// (allocated, the split by namespace, the number of counted objects). It is
// the only writer of those figures. Admission only reserves the in-flight
// window: Reserve holds an amount for an object that does not exist yet,
// judged against allocated + reserved + request <= limit. When the observer
// counts the object it folds the reservation in the same write that adds
// the object to allocated, so a reader sees the object's amount once, as a
// reservation or as allocated, never both and never neither. The bucket keeps
// no per-object list: the observer holds that, and can rebuild it from the
// live objects at any time.
//
// # Buckets, grants and limits
//
// Quota is counted in buckets. A bucket is identified by a BucketKey: the
// consumer (a Project, an Organization, ...), the resource type, and the
// request's dimensions in canonical label form. A bucket's limit is not
// configured on the bucket: the ledger computes it from the GrantSource as
// the overflow-checked sum of the amounts of all grants for the same
// consumer and resource type whose selector matches the bucket's
// dimensions. Grants are additive. The contributing grants are stored with the
// limit so the number can be explained. Refresh and Observe (the leader's
// writes) record the limit their GrantSource gives; any other write records
// one only on a bucket that records none yet, and a reservation is decided
// by the lower of the recorded limit and the writer's own (limitIn): a
// writer whose grant cache lags a lowered grant is held to it once the
// bucket records it, and never writes the old limit back. Lowering a limit never revokes
// usage or reservations; it only blocks new ones, and a bucket may sit above
// its limit until usage drains. Observed usage is stored as observed, even
// above the limit: it is the truth about objects that exist.
//
// # Why the store is per bucket
//
// A Store offers one operation that writes: Apply, an atomic read-modify-write
// of a single bucket. That is exactly what a Kubernetes object offers (update
// with resourceVersion compare-and-swap, retried on conflict), and what a
// group-committing writer can batch: several callers' mutate functions run one
// after another on the same in-memory copy and are written in one update. A
// mutate that refuses returns a *RefusedError, so a batching store can drop
// that caller alone and commit the rest. Because mutate may run more than
// once, every mutate in this package is a pure function of the bucket it is
// given plus values computed before the call, and one that returns an error
// has not touched the bucket.
//
// Everything spanning buckets lives here, above the store: a claim touching
// several buckets (a project cap and an organization cap, "most restrictive
// wins") takes them one Apply at a time in a fixed order (by BucketKey.Name)
// and, if a later bucket refuses, rolls back what this call took. Other
// callers may briefly observe the earlier buckets' reservations; they can
// only be refused by them, never over-admitted, so no bucket ever exceeds its
// limit. No store needs multi-object transactions.
//
// # Claim ids and idempotency
//
// Every reservation in a bucket is keyed by the claim's ID (the object's uid
// for a CREATE, "<uid>/<generation>/<growth>" for the growth of an UPDATE, the
// ResourceClaim's uid for a controller-decided claim). A bucket that already
// holds a reservation under the ID for at least the amount asked counts as
// taken, and nothing is added: replaying a granted claim returns a granted
// decision and changes nothing, not even the expiry. A call asking for more
// than is held under the ID (two quota constraints counting one object into
// one bucket with different amounts; the observer counts the larger) grows
// the reservation to its amount, the growth checked against the limit like
// any take, with the call's expiry, and its rollback (or Undo) puts the
// smaller reservation back. Once the observer has folded the
// reservation the ID is no longer held, and a late replay reserves again
// until the next observation folds it too. Rollback only removes (or puts
// back) reservations that the same call wrote, so a replay never un-counts quota
// held by an earlier call. Requests of one claim that resolve to the same
// bucket are merged by summing their amounts. Release is idempotent by ID as
// well, and Observe ignores the IDs it names that a bucket does not hold.
// Calls for the same ID are serialized within one Ledger; across processes
// the per-bucket semantics still hold but two concurrent calls for one ID may
// interleave, so callers should not race a claim against itself.
//
// Mutations that would change nothing (a replay, releasing an absent
// reservation, an observation that matches the bucket, refreshing a current
// limit) are not written at all, and a bucket is only created by a write
// that needs it.
//
// # Reservations and TTL
//
// Reserve is the admission path: the object does not exist yet, so its quota
// is held as a reservation that expires (DefaultReservationTTL, two minutes,
// unless WithReservationTTL says otherwise). A reservation counts against the
// bucket until it is removed, and only these remove one: the
// observer's Fold (the object is now counted in allocated), the observer's
// Expire (past ExpiresAt with no object: rejected later in the admission
// chain, or the client gave up), Release (a controller-decided claim
// being deleted), a denied claim's rollback, and Undo (the admission review
// that reserved it ended in a denial: another constraint refused the
// object). Undo, like the rollback, removes only what one call added, known
// by the claim's ID and that call's ExpiresAt. The ledger never drops one by
// itself on its clock, since only whoever watches the objects can tell one
// that never appeared from one whose object is merely late.
//
// A bucket nobody folds (the observer away) would grow without end, so the
// reserving write compacts admission creates past WithCompactAbove into sums
// (sums.go): reservations "sum/<n>" of their total amount, with reserved
// unchanged. A sum is removed only by the observer naming it in Fold.
//
// # Arithmetic and validation
//
// Every sum is checked: int64 overflow is an error wrapping ErrOverflow,
// never a wrap-around and never a silent cap. A limit the grants cannot give
// (their sum overflows) is unknown: Reserve refuses with that error, while
// Release, rollback and Observe (fold, expiry, usage) still write and leave
// the bucket's last limit, so cleanup never depends on the grants. Add and Sub are that check,
// exported so other packages sum amounts the same way. Invalid claims are rejected
// with a *ValidationError naming each bad field (for example
// "requests[1].amount: must be positive, got -3") before anything is written.
package ledger
