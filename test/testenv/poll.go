package testenv

import (
	"net"
	"testing"
	"time"
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

// FreePort returns a loopback port nobody listens on now, for a process a
// test bed starts (another process may take it before that one binds it).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
