package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/quotakeeper/quotakeeper/localcluster"
)

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
