package main

import (
	"context"
	"time"
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
	for _, g := range h.c.Gatekeepers {
		m, err := g.Scrape(ctx)
		if err != nil {
			continue
		}
		writes, mutations := m.Histogram("quotakeeper_group_commit_batch_size")
		s.gatekeeperWrites += float64(writes)
		s.gatekeeperMutations += mutations
		s.conflicts += m.Counter("quotakeeper_bucket_write_conflicts_total", nil)
	}
	if h.c.Manager != nil {
		if m, err := h.c.Manager.Scrape(ctx); err == nil {
			writes, _ := m.Histogram("quotakeeper_group_commit_batch_size")
			s.managerWrites = float64(writes)
			s.conflicts += m.Counter("quotakeeper_bucket_write_conflicts_total", nil)
		}
	}
	return s
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
