package observer

import (
	"fmt"
	"os"
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
)

// TestMain registers the builtins once for the test binary, as the
// manager's main does, before any test builds a policy (its driver copies
// OPA's builtin table). No process Env: the observer's evaluations carry
// their own.
func TestMain(m *testing.M) {
	if err := builtins.Register(nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
