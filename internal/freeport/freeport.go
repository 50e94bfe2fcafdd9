// Package freeport picks loopback ports for the processes a local test bed
// starts.
package freeport

import "net"

// Get returns a loopback port nobody listens on now (another process may
// take it before the one it is meant for binds it).
func Get() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
