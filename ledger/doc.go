// Package ledger owns quota arithmetic for quotakeeper and nothing else.
// Admission builtins, controllers and the CLI are thin adapters over it.
//
// # Buckets, grants and limits
//
// Quota is counted in buckets. A bucket is identified by a BucketKey: the
// consumer (a Project, an Organization, ...), the resource type, and the
// request's dimensions in canonical label form. A bucket's limit is not
// configured on the bucket: on every write the ledger recomputes it from the
// GrantSource as the overflow-checked sum of the amounts of all grants for
// the same consumer and resource type whose selector matches the bucket's
// dimensions. Grants are additive. The contributing grants are stored with the
// limit so the number can be explained. Lowering a limit never revokes
// allocations or reservations; it only blocks new ones, and a bucket may sit
// above its limit until usage drains.
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
// Every entry in a bucket is keyed by the claim's ID. A bucket that already
// holds an allocation or a reservation under the ID counts as taken, and
// nothing is added: replaying a granted claim returns a granted decision and
// changes nothing, whatever amounts the replay carries. Rollback only removes
// entries that the same call added, so a replay never un-counts quota held by
// an earlier call. Requests of one claim that resolve to the same bucket are
// merged by summing their amounts. Realize and Release are idempotent by ID as
// well. Calls for the same ID are serialized within one Ledger; across
// processes the per-bucket semantics still hold but two concurrent calls for
// one ID may interleave, so callers should not race a claim against itself.
//
// Mutations that would change nothing (a replay, releasing an absent entry,
// refreshing a current limit) are not written at all, and a bucket is only
// created by a write that needs it.
//
// # Reservations and TTL
//
// Reserve is the admission path: the object does not exist yet, so its quota
// is held as a reservation that expires (DefaultReservationTTL, two minutes,
// unless WithReservationTTL says otherwise). Realize turns the reservation
// into an allocation once the object exists; if the reservation already
// expired, the allocation is added anyway, since the object exists and
// counting it is the truth. A reservation counts against the bucket until
// it is released: the ledger never drops one by itself, since only whoever
// watches the object can tell one that never appeared (Release it at or after
// ExpiresAt) from one whose realization is merely late. Allocate records
// allocations directly, for claims decided by a controller about objects that
// already exist.
//
// # Arithmetic and validation
//
// Every sum is checked: int64 overflow is an error wrapping ErrOverflow,
// never a wrap-around and never a silent cap. Add and Sub are that check,
// exported so other packages sum amounts the same way. Invalid claims are rejected
// with a *ValidationError naming each bad field (for example
// "requests[1].amount: must be positive, got -3") before anything is written.
package ledger
