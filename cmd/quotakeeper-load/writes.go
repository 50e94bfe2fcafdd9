package main

import (
	"context"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/quotakeeper/quotakeeper/localcluster"
)

// writeSample counts AllowanceBucket status writes so far, from the
// quotakeeper_group_commit_batch_size histograms (one observation per
// write, its value the mutations carried) and the conflict counters:
// Gatekeeper's are reservations, the manager's the observer's folds and
// the claim controller's reservations.
type writeSample struct {
	gatekeeperWrites, gatekeeperMutations, managerWrites, conflicts float64
}

func (h *harness) writes(ctx context.Context) writeSample {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var s writeSample
	read := func(p *localcluster.Process) (writes, mutations, conflicts float64) {
		fams, err := p.Scrape(ctx)
		if err != nil {
			return 0, 0, 0
		}
		if f := fams["quotakeeper_group_commit_batch_size"]; f != nil {
			for _, m := range f.GetMetric() {
				writes += float64(m.GetHistogram().GetSampleCount())
				mutations += m.GetHistogram().GetSampleSum()
			}
		}
		return writes, mutations, counter(fams["quotakeeper_bucket_write_conflicts_total"])
	}
	for _, g := range h.c.Gatekeepers {
		w, m, c := read(g)
		s.gatekeeperWrites, s.gatekeeperMutations, s.conflicts = s.gatekeeperWrites+w, s.gatekeeperMutations+m, s.conflicts+c
	}
	if h.c.Manager != nil {
		w, _, c := read(h.c.Manager)
		s.managerWrites, s.conflicts = w, s.conflicts+c
	}
	return s
}

func counter(f *dto.MetricFamily) float64 {
	var n float64
	for _, m := range f.GetMetric() {
		n += m.GetCounter().GetValue()
	}
	return n
}

// printWrites says how many bucket writes a phase's creates cost: on a
// busy machine each one is API server CPU (docs/design/observed-usage.md).
func (h *harness) printWrites(before, after writeSample) {
	gk := after.gatekeeperWrites - before.gatekeeperWrites
	if gk == 0 && after.managerWrites == before.managerWrites {
		return
	}
	perWrite := 0.0
	if gk > 0 {
		perWrite = (after.gatekeeperMutations - before.gatekeeperMutations) / gk
	}
	h.printf("    bucket status writes: gatekeeper %.0f (%.1f reservations each), manager %.0f; %.0f conflicts\n",
		gk, perWrite, after.managerWrites-before.managerWrites, after.conflicts-before.conflicts)
}
