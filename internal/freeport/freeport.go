// Package freeport picks loopback ports for the processes a local test bed
// starts.
package freeport

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
	// claims hold, open and locked for the life of the process, the lock
	// files of the ports it handed out.
	claims []*os.File
)

// Get returns a port nobody listens on now, below the ephemeral range and
// never the same twice in one process, nor in two that run at once: each
// port handed out is claimed with a lock on a file named for it under
// os.TempDir()/quotakeeper-freeport, held until the process exits (the
// kernel drops it then, however the process ends). CI runs several test
// binaries side by side, each starting a cluster of many processes; without
// the claim, two could pick the same port between one's check and its
// server's bind ("address already in use" at a cluster's start).
func Get() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	for range 200 {
		port := first + rand.IntN(below()-first)
		if handed[port] || !claim(port) {
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

// claim takes port's lock file for this process, or reports that another
// process holds it. A claim it cannot make for want of the directory is
// skipped, not fatal: the port is still checked free.
func claim(port int) bool {
	dir := filepath.Join(os.TempDir(), "quotakeeper-freeport")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return false
	}
	claims = append(claims, f)
	return true
}
