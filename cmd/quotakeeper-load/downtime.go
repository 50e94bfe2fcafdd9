package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// Phase (g): creating at full rate through a manager restart and through
// -downtime (ten minutes by default) of manager downtime. Admission goes on
// without the manager: Gatekeeper reserves against the last written usage,
// and nothing folds the reservations until the manager is back, so the
// bucket must stay bounded (compaction into sums) and admission fast. The
// creators run without pause through four stretches, one measured result
// each: steady (20 s), restart (the manager stopped and started at its
// start; 30 s), down (the manager killed at its start; -downtime), back
// (the manager started again; 60 s). Then the phase settles like the
// others: the bucket counts exactly the live objects, nothing reserved
// (the sums freed behind the observer's barrier).
//
// Checked: no failed create in any stretch, the bucket never above 64 KiB
// (sampled every two seconds), settled, and each stretch's rate beside
// (c)'s of the same run (the goal: within 20%).

// maxBucketBytes is the bound a bucket must stay within however long the
// manager is away (ledger.DefaultCompactAbove's reason).
const maxBucketBytes = 64 << 10

// stretch is one part of phase (g): what happens to the manager at its
// start, and how long it lasts.
type stretch struct {
	name  string
	event func(context.Context) error
	last  time.Duration
}

func (h *harness) downtimePhase(ctx context.Context) error {
	cfg := h.cfg
	namespaces, org, err := h.orgNamespaces(ctx, "g")
	if err != nil {
		return err
	}
	if err := h.grant(ctx, org, cfg.grant); err != nil {
		return err
	}
	if err := h.constraint(ctx, "QuotaEntity", "load-g", namespaces, orgEntity()); err != nil {
		return err
	}
	if err := h.ready(ctx, namespaces[0]); err != nil {
		return err
	}
	if err := h.effectiveGrants(ctx, namespaces, org, cfg.grant); err != nil {
		return err
	}
	key := ledger.NewBucketKey(ledgerconv.Consumer(org), resourceType, nil)
	bucket := client.ObjectKey{
		Namespace: quotav1alpha1.BucketNamespace(ledgerconv.ConsumerRef(key.Consumer), quotav1alpha1.DefaultSystemNamespace),
		Name:      key.Name(),
	}

	mgr := h.c.Manager
	stretches := []stretch{
		{"steady", nil, 20 * time.Second},
		{"restart", func(ctx context.Context) error { mgr.Stop(); return h.c.Restart(ctx, mgr) }, 30 * time.Second},
		{"down", func(context.Context) error { mgr.Kill(); return nil }, cfg.downtime},
		{"back", func(ctx context.Context) error { return h.c.Restart(ctx, mgr) }, time.Minute},
	}
	h.printf("(g) creating without pause through: %s steady, a manager restart (%s), the manager killed for %s, then %s with it back\n",
		stretches[0].last, stretches[1].last, stretches[2].last, stretches[3].last)

	// The bucket's size, sampled while the creators run.
	var largest atomic.Int64
	sampling, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampling.Err() == nil {
			if n, err := h.serializedSize(sampling, bucket); err == nil && int64(n) > largest.Load() {
				largest.Store(int64(n))
			}
			select {
			case <-sampling.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}()

	var seq atomic.Int64
	base := h.results["c"]
	results := make([]*result, len(stretches))
	for i, st := range stretches {
		queue := make(chan job, cfg.creators)
		stop := time.Now().Add(st.last)
		go func() {
			defer close(queue)
			for time.Now().Before(stop) && ctx.Err() == nil {
				n := seq.Add(1)
				queue <- job{namespaces[int(n)%len(namespaces)], fmt.Sprintf("g-%d", n), map[string]string{phaseLabel: "g"}}
			}
		}()
		event := make(chan error, 1)
		go func() {
			if st.event == nil {
				event <- nil
				return
			}
			event <- st.event(ctx)
		}()
		before := h.cpu()
		if st.event != nil {
			// The manager stops or starts as the stretch does: its CPU is
			// the new process's, from its start (none while it is down).
			delete(before, "manager")
		}
		r := h.driveQueue(ctx, queue, 0)
		after := h.cpu()
		if err := <-event; err != nil {
			stopSampling()
			<-sampled
			return fmt.Errorf("(g) %s: %w", st.name, err)
		}
		if ctx.Err() != nil {
			stopSampling()
			<-sampled
			return ctx.Err()
		}
		r.id = "g"
		results[i] = r
		// Beside the steady stretch (the same sustained load: audit
		// passes, a growing count) and beside (c), a burst of a few
		// seconds started just after an audit pass.
		vs := fmt.Sprintf("%.2f of steady", r.rate()/results[0].rate())
		if base != nil {
			vs += fmt.Sprintf(", %.2f of (c)", r.rate()/base.rate())
		}
		h.printf("(g) %-7s %6d creates, %6d admitted, %d denied by quota, %d failed in %s: %.1f/s (%s), p50 %s, p99 %s\n",
			st.name, r.attempts, r.admitted, r.denied, r.failed(), r.wall.Round(100*time.Millisecond), r.rate(), vs, r.p(50), r.p(99))
		h.perCreate(before, after, r)
		h.printFailures(&r.failures)
		if r.failed() > 0 {
			h.violate("(g) %s: %d creates failed", st.name, r.failed())
		}
	}
	stopSampling()
	<-sampled
	h.printf("(g) the bucket's largest size while the creators ran: %d bytes (bound %d)\n", largest.Load(), maxBucketBytes)
	if largest.Load() > maxBucketBytes {
		h.violate("(g) the bucket grew to %d bytes, beyond %d", largest.Load(), maxBucketBytes)
	}
	if _, err := h.settle(ctx, "(g)", namespaces, org); err != nil {
		return err
	}
	return nil
}
