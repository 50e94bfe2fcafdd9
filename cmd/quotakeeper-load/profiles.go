package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/client-go/rest"

	"github.com/quotakeeper/quotakeeper/internal/freeport"
)

// profileTargets are the pprof endpoints -pprof reads besides the
// apiserver's: Gatekeeper replica 0's --pprof-port and the manager's
// --pprof-bind-address, on free loopback ports chosen before the cluster
// starts. (Other replicas get the same flags; their profilers cannot bind
// the port, which Gatekeeper only logs.)
type profileTargets struct{ gatekeeper, manager string }

func newProfileTargets() (profileTargets, []string, []string, error) {
	gk, err := freeport.Get()
	if err != nil {
		return profileTargets{}, nil, nil, err
	}
	mgr, err := freeport.Get()
	if err != nil {
		return profileTargets{}, nil, nil, err
	}
	t := profileTargets{
		gatekeeper: fmt.Sprintf("http://localhost:%d", gk),
		manager:    fmt.Sprintf("http://127.0.0.1:%d", mgr),
	}
	return t, []string{"--enable-pprof", fmt.Sprintf("--pprof-port=%d", gk)},
		[]string{fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", mgr)}, nil
}

// startProfiles captures a CPU profile of kube-apiserver, Gatekeeper
// replica 0 and the manager for -pprof-seconds from now, into
// <-pprof>/<replicas>-<phase>-<process>.pprof; wait blocks until all are
// written. Failures are printed, not fatal: profiles are a diagnosis.
func (h *harness) startProfiles(ctx context.Context, phase string) (wait func()) {
	if h.cfg.pprofDir == "" {
		return func() {}
	}
	seconds := int(h.cfg.pprofLength.Seconds())
	apiserver, err := rest.HTTPClientFor(h.c.Config)
	if err != nil {
		h.printf("    profiles: %v\n", err)
		return func() {}
	}
	targets := []struct {
		name, url string
		client    *http.Client
	}{
		{"kube-apiserver", strings.TrimSuffix(h.c.Config.Host, "/"), apiserver},
		{"gatekeeper-0", h.profiles.gatekeeper, http.DefaultClient},
		{"manager", h.profiles.manager, http.DefaultClient},
	}
	var wg sync.WaitGroup
	for _, t := range targets {
		file := filepath.Join(h.cfg.pprofDir, fmt.Sprintf("%d-%s-%s.pprof", h.replicas, phase, t.name))
		wg.Go(func() {
			if err := fetchProfile(ctx, t.client, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", t.url, seconds), file); err != nil {
				h.printf("    profile of %s: %v\n", t.name, err)
			}
		})
	}
	return func() {
		wg.Wait()
		h.printf("    CPU profiles of the first %ds in %s\n", seconds, h.cfg.pprofDir)
	}
}

// heapProfile writes the manager's heap profile into
// <-pprof>/<replicas>-<phase>-manager-heap.pprof (managerMemory).
func (h *harness) heapProfile(ctx context.Context, phase string) {
	if h.cfg.pprofDir == "" {
		return
	}
	file := filepath.Join(h.cfg.pprofDir, fmt.Sprintf("%d-%s-manager-heap.pprof", h.replicas, phase))
	if err := fetchProfile(ctx, http.DefaultClient, h.profiles.manager+"/debug/pprof/heap", file); err != nil {
		h.printf("    heap profile of the manager: %v\n", err)
	}
}

func fetchProfile(ctx context.Context, c *http.Client, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
