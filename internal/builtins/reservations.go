package builtins

// What one admission review reserved, to give back if the review denies.
//
// Gatekeeper evaluates every constraint a request matches and denies if any
// of them does. A quota constraint's quota.reserve runs before the verdict
// of the others is known, so a grant it made is still held when another
// constraint (a second quota constraint, or any policy) denies the request;
// the object will never be created, and the reservation held shared quota
// until its TTL. The hosting process (package plugin) wraps Gatekeeper's
// validation handler: it puts a Reservations into the context of each
// review, quota.reserve records there what each granted call added
// (ledger.Taken), and when the final response is a denial the wrapper calls
// Release, which undoes exactly those. The record lives and dies with the
// request's context, in the process that reserved: with several Gatekeeper
// replicas, each releases only what its own reviews took.

import (
	"context"
	"errors"
	"sync"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// Reservations collects what quota.reserve added during one admission
// review. Safe for concurrent use: the frameworks driver may evaluate a
// review's templates concurrently.
type Reservations struct {
	mu    sync.Mutex
	taken []taken
}

// taken is one call's additions and the ledger that made them (its Env's,
// which a later Env does not change).
type taken struct {
	ledger *ledger.Ledger
	taken  ledger.Taken
}

type reservationsKey struct{}

// WithReservations returns a context under which quota.reserve records in
// rs what every granted call adds. The frameworks rego driver hands the
// context of Client.Review to rego.Eval, and OPA gives it to every builtin
// as BuiltinContext.Context (as WithRecorder relies on too).
func WithReservations(ctx context.Context, rs *Reservations) context.Context {
	return context.WithValue(ctx, reservationsKey{}, rs)
}

func reservationsFrom(ctx context.Context) *Reservations {
	if ctx == nil {
		return nil
	}
	rs, _ := ctx.Value(reservationsKey{}).(*Reservations)
	return rs
}

// add records what one call added; a call that added nothing (a denial, a
// replay of an earlier call's reservation) is not recorded.
func (rs *Reservations) add(l *ledger.Ledger, t ledger.Taken) {
	if rs == nil || t.Empty() {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.taken = append(rs.taken, taken{ledger: l, taken: t})
}

// Len is the number of calls that added reservations and have not been
// released.
func (rs *Reservations) Len() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.taken)
}

// Release undoes, latest first, what every recorded call added
// (ledger.Undo: only reservations still held with that call's expiry) and
// forgets them. It tries every call whatever the others do, and returns
// their errors joined; what it could not undo stays held until it expires.
func (rs *Reservations) Release(ctx context.Context) error {
	rs.mu.Lock()
	all := rs.taken
	rs.taken = nil
	rs.mu.Unlock()
	var errs []error
	for i := len(all) - 1; i >= 0; i-- {
		if err := all[i].ledger.Undo(ctx, all[i].taken); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
