package freeport

import (
	"net"
	"strconv"
	"testing"
)

// Ports come from below the ephemeral range, are never handed out twice,
// and can be listened on.
func TestGetReturnsDistinctFreePortsBelowTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		port, err := Get()
		if err != nil {
			t.Fatal(err)
		}
		if port < first || port >= below() {
			t.Fatalf("port %d outside [%d, %d)", port, first, below())
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("port %d: %v", port, err)
		}
		_ = l.Close()
	}
}
