package builtins

import (
	"context"
	"fmt"
	"time"
)

// DefaultDeadline bounds one quota.reserve call: below the 10s webhook
// timeout quotakeeper's Gatekeeper values set, leaving Gatekeeper time to
// answer with the denial before the API server gives up on it.
const DefaultDeadline = 8 * time.Second

// withDeadline is the context a builtin call waits under: the evaluation's
// (Gatekeeper's request context, cancelled when the API server stops
// waiting), bounded by the Env's deadline d (0: no bound of its own). A call
// that reaches it halts, so the request is denied, and what it wrote is
// undone behind it (ledger.Reserve): a reservation never outlives the
// admission request that asked for it.
func withDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if ctx == nil {
		ctx = context.Background()
	}
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("no decision within the quota deadline of %s", d))
}
