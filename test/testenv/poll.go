package testenv

import (
	"testing"
	"time"

	"github.com/quotakeeper/quotakeeper/internal/freeport"
)

// Eventually polls check until it returns nil, and fails the test with what
// and check's last error once timeout has passed. It polls every 25ms at
// first, backing off to every 250ms: envtest suites converge in well under a
// second, while end-to-end waits of a minute should not hammer the apiserver.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	interval := 25 * time.Millisecond
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %s: %v", what, timeout, err)
		}
		time.Sleep(interval)
		interval = min(2*interval, 250*time.Millisecond)
	}
}

// FreePort returns a loopback port nobody listens on now (freeport.Get).
func FreePort() (int, error) { return freeport.Get() }
