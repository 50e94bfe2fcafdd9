package ledger

import (
	"errors"
	"fmt"
	"math"
)

// ErrOverflow is wrapped by every error caused by int64 overflow. Quota
// amounts are summed in many places (grants into a limit, reservations into
// reserved, usage by namespace, requests for the same bucket); a wrapped-around sum would
// silently turn "far too much" into "plenty left", so overflow is always an
// error and never saturates.
var ErrOverflow = errors.New("int64 overflow")

// Add returns a+b, or an error wrapping ErrOverflow if the sum does not
// fit in an int64. It is the one overflow check for quota amounts: the
// ledger's sums and every other package's (webhooks, controllers) use it,
// each wording its own message for users.
func Add(a, b int64) (int64, error) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, fmt.Errorf("%w: %d + %d", ErrOverflow, a, b)
	}
	return a + b, nil
}

// Sub returns a-b, or an error wrapping ErrOverflow if the difference
// does not fit in an int64.
func Sub(a, b int64) (int64, error) {
	if (b < 0 && a > math.MaxInt64+b) || (b > 0 && a < math.MinInt64+b) {
		return 0, fmt.Errorf("%w: %d - %d", ErrOverflow, a, b)
	}
	return a - b, nil
}
