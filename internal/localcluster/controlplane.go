package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
)

// The control plane's processes, for fault tests: envtest starts etcd and
// kube-apiserver and keeps their handles to itself, so the cluster adopts
// them by process id (envtest's own child processes, each the leader of its
// process group) with the exact command line envtest gave them. Killing one
// and starting it again then runs the same binary with the same flags: the
// same ports, etcd data directory, certificates and authentication
// configuration, which envtest keeps on disk until the cluster stops.

// Etcd is the control plane's etcd as a Process: Kill or Stop it and Start
// it again with the same data directory and ports. Start waits until etcd
// answers /health.
func (c *Cluster) Etcd() (*Process, error) {
	if c.etcd != nil {
		return c.etcd, nil
	}
	e := c.env.ControlPlane.Etcd
	if e == nil || e.URL == nil {
		return nil, errors.New("etcd is not running")
	}
	p, err := c.adopt("etcd", e.Path)
	if err != nil {
		return nil, err
	}
	p.Ready = e.URL.String() + "/health"
	c.etcd = p
	return p, nil
}

// APIServer is the control plane's kube-apiserver as a Process: Kill it and
// Start it again on the same port with the same certificates and flags.
// Its readiness endpoint is served over TLS by a CA of envtest's, so Start
// does not wait on it: call WaitAPIServer.
func (c *Cluster) APIServer() (*Process, error) {
	if c.apiserver != nil {
		return c.apiserver, nil
	}
	s := c.env.ControlPlane.APIServer
	if s == nil {
		return nil, errors.New("kube-apiserver is not running")
	}
	p, err := c.adopt("kube-apiserver", s.Path)
	if err != nil {
		return nil, err
	}
	c.apiserver = p
	return p, nil
}

// EtcdEndpoint is the URL etcd serves clients on.
func (c *Cluster) EtcdEndpoint() string { return c.env.ControlPlane.Etcd.URL.String() }

// WaitAPIServer waits until the apiserver answers /readyz with 200, as the
// cluster's administrator.
func (c *Cluster) WaitAPIServer(ctx context.Context, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		var status int
		res := cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&status)
		last = res.Error()
		if last == nil && status == 200 {
			return nil
		}
		if last == nil {
			last = fmt.Errorf("/readyz answered %d", status)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready after %s: %w", timeout, last)
}

// stopControlPlane stops the adopted processes, kube-apiserver first, before
// envtest cleans up: envtest's handles know nothing of a restarted process.
func (c *Cluster) stopControlPlane() {
	if c.apiserver != nil {
		c.apiserver.Stop()
	}
	if c.etcd != nil {
		c.etcd.Stop()
	}
}

// adopt finds the child process of this one that envtest started from path
// and returns it as a running Process with its command line.
func (c *Cluster) adopt(name, path string) (*Process, error) {
	pid, args, err := childProcess(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return nil, err
	}
	p := &Process{
		Name:    name,
		Path:    path,
		Args:    args,
		LogPath: filepath.Join(c.opts.Dir, name+".log"),
	}
	p.adopted(proc)
	return p, nil
}

// childProcess is the process id and arguments of this process's child
// whose argv[0] is path, read from /proc.
func childProcess(path string) (int, []string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, err
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
		if argv[0] == path {
			return pid, argv[1:], nil
		}
	}
	return 0, nil, fmt.Errorf("no child process runs %s", path)
}

// adopted makes p the handle of a running process that another part of this
// program started (and waits for): its exit is seen when its id is gone.
func (p *Process) adopted(proc *os.Process) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for syscall.Kill(proc.Pid, 0) == nil {
			time.Sleep(50 * time.Millisecond)
		}
	}()
	p.mu.Lock()
	p.pid, p.done = proc.Pid, done
	p.mu.Unlock()
}
