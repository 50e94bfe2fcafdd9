// Package ledgertest holds test doubles of the ledger's interfaces, for
// the tests of every package that drives a ledger.
package ledgertest

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// ErrGone is what a crashed store's writes fail with.
var ErrGone = errors.New("replica gone")

// CrashableStore is a Store whose writes fail once Crash is called: a
// Gatekeeper replica gone, with whatever it held in memory (a lease's
// admissions not yet recorded) lost. Reads go on, as another process's
// would.
type CrashableStore struct {
	ledger.Store
	crashed atomic.Bool
}

// Crash fails every later Apply with ErrGone.
func (s *CrashableStore) Crash() { s.crashed.Store(true) }

// Apply applies mutate through the wrapped store until Crash.
func (s *CrashableStore) Apply(ctx context.Context, key ledger.BucketKey, mutate func(*ledger.Bucket) error) (ledger.Bucket, error) {
	if s.crashed.Load() {
		return ledger.Bucket{}, ErrGone
	}
	return s.Store.Apply(ctx, key, mutate)
}
