// Package freeport picks loopback ports for the processes a local test bed
// starts.
package freeport

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// below is the first port the kernel hands out as the source of an
// outgoing connection (net.ipv4.ip_local_port_range). A port the kernel
// picked for a listener (":0") comes from that range too, so one of the test
// bed's many client connections could take it between Get and the bind
// ("bind: address already in use", seen in make test); a port below it is
// taken only by a listener that asks for it by number.
var below = sync.OnceValue(func() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768 // Linux's default
	}
	low, err := strconv.Atoi(strings.Fields(string(data) + " 0")[0])
	if err != nil || low <= first+1000 {
		return 32768
	}
	return low
})

// first is the lowest port Get returns: above the well-known and most
// registered services' ports.
const first = 20000

var (
	mu     sync.Mutex
	handed = map[int]bool{}
)

// Get returns a port nobody listens on now, below the ephemeral range and
// never the same twice in one process (another process may still take it
// before the one it is meant for binds it, but none picks it by chance).
func Get() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	for range 200 {
		port := first + rand.IntN(below()-first)
		if handed[port] {
			continue
		}
		// Free on every address: some of the processes listen on ":port".
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		_ = l.Close()
		handed[port] = true
		return port, nil
	}
	return 0, errors.New("freeport: no free port below the ephemeral range after 200 tries")
}
