package localcluster

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Balancer is a loopback TCP load balancer: it spreads connections over its
// backends round-robin and skips backends that refuse, the way a Service
// spreads webhook calls over Gatekeeper pods. TLS passes through untouched,
// so every backend serves the same certificate.
type Balancer struct {
	listener net.Listener
	backends []string
	next     atomic.Uint64
	wg       sync.WaitGroup
}

// NewBalancer listens on a free loopback port.
func NewBalancer(backends []string) (*Balancer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Balancer{listener: l, backends: backends}
	b.wg.Add(1)
	go b.serve()
	return b, nil
}

// Addr is host:port of the balancer.
func (b *Balancer) Addr() string { return b.listener.Addr().String() }

// Close stops accepting; open connections finish on their own.
func (b *Balancer) Close() error {
	err := b.listener.Close()
	b.wg.Wait()
	return err
}

func (b *Balancer) serve() {
	defer b.wg.Done()
	for {
		conn, err := b.listener.Accept()
		if err != nil {
			return
		}
		go b.proxy(conn)
	}
}

func (b *Balancer) proxy(client net.Conn) {
	defer client.Close()
	start := b.next.Add(1)
	var backend net.Conn
	for i := range len(b.backends) {
		addr := b.backends[(int(start)+i)%len(b.backends)]
		c, err := net.Dial("tcp", addr)
		if err == nil {
			backend = c
			break
		}
	}
	if backend == nil {
		return
	}
	defer backend.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(backend, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, backend); done <- struct{}{} }()
	<-done
}
