package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/quotakeeper/quotakeeper/internal/localcluster"
)

// managerMemory prints the manager's resident memory and Go heap in use
// (the other side of a GOGC setting, -manager-env, and what the chart's
// memory limit must hold as counted objects grow) and, with -pprof, writes
// its heap profile, which says what that memory holds.
func (h *harness) managerMemory(ctx context.Context, phase string) {
	defer h.heapProfile(ctx, phase)
	m, err := h.c.Manager.Scrape(ctx)
	if err != nil {
		h.printf("    manager memory: %v\n", err)
		return
	}
	rss, _ := m.Gauge("process_resident_memory_bytes", nil)
	heap, _ := m.Gauge("go_memstats_heap_inuse_bytes", nil)
	h.printf("    manager memory: resident %.0f MiB, Go heap in use %.0f MiB\n", rss/(1<<20), heap/(1<<20))
}

// cpuUsers are the processes a phase's CPU is reported for, in print order.
var cpuUsers = []string{"kube-apiserver", "etcd", "gatekeeper", "manager", "load"}

// cpuSample is the CPU time each process of the run has used so far
// (every Gatekeeper replica summed under one name). Rates alone cannot say
// why a phase is slower than another on a machine whose cores are all
// busy; CPU per create says which process pays for it.
type cpuSample map[string]time.Duration

func (h *harness) cpu() cpuSample {
	s := cpuSample{}
	add := func(name string, p *localcluster.Process, err error) {
		if err != nil || p == nil {
			return
		}
		if d, err := p.CPUTime(); err == nil {
			s[name] += d
		}
	}
	apiserver, err := h.c.APIServer()
	add("kube-apiserver", apiserver, err)
	etcd, err := h.c.Etcd()
	add("etcd", etcd, err)
	for _, g := range h.c.Gatekeepers {
		add("gatekeeper", g, nil)
	}
	add("manager", h.c.Manager, nil)
	if d, err := localcluster.CPUTime(os.Getpid()); err == nil {
		s["load"] = d
	}
	return s
}

// perCreate prints the CPU each process used between before and after, per
// create answered, and how many of the machine's cores were busy.
func (h *harness) perCreate(before, after cpuSample, r *result) {
	if r.answered() == 0 || r.wall <= 0 {
		return
	}
	var parts []string
	var total time.Duration
	for _, name := range cpuUsers {
		used := after[name] - before[name]
		total += used
		parts = append(parts, fmt.Sprintf("%s %.2f", name, ms64(used)/float64(r.answered())))
	}
	h.printf("    CPU ms per create: %s; total %.2f (%.1f of %d cores busy)\n",
		strings.Join(parts, ", "), ms64(total)/float64(r.answered()), total.Seconds()/r.wall.Seconds(), runtime.NumCPU())
}

func ms64(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
