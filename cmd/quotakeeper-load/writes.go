package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/quotakeeper/quotakeeper/internal/localcluster"
)

// writeSample counts AllowanceBucket status writes so far, from the
// quotakeeper_group_commit_batch_size histograms (one observation per
// write, its value the mutations carried) and the conflict counters:
// Gatekeeper's are reservations, the manager's the observer's folds and
// the claim controller's reservations.
type writeSample struct {
	gatekeeperWrites, gatekeeperMutations, managerWrites, conflicts float64
	// leased counts the creates admitted inside capacity leases.
	leased float64
	// api counts the API server's successful writes of quotakeeper's
	// kinds, by resource[/subresource]: what bucket writes cause besides
	// (effective grants, ResourceClaim views).
	api map[string]float64
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
		s.leased += m.Counter("quotakeeper_leased_admissions_total", nil)
	}
	if h.c.Manager != nil {
		if m, err := h.c.Manager.Scrape(ctx); err == nil {
			writes, _ := m.Histogram("quotakeeper_group_commit_batch_size")
			s.managerWrites = float64(writes)
			s.conflicts += m.Counter("quotakeeper_bucket_write_conflicts_total", nil)
		}
	}
	s.api = h.apiWrites(ctx)
	return s
}

// apiWrites reads the API server's apiserver_request_total and counts the
// successful writes (create, update, patch, apply, delete) of quotakeeper's
// group by resource[/subresource]; nil when it cannot be read.
func (h *harness) apiWrites(ctx context.Context) map[string]float64 {
	cfg := rest.CopyConfig(h.c.Config)
	cfg.AcceptContentTypes, cfg.ContentType = "text/plain", "" // not the cluster's protobuf
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil
	}
	m, err := localcluster.ParseMetrics(bytes.NewReader(raw))
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, s := range m["apiserver_request_total"].GetMetric() {
		l := map[string]string{}
		for _, p := range s.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if l["group"] != "quota.miloapis.com" || !strings.HasPrefix(l["code"], "2") ||
			!slices.Contains([]string{"POST", "PUT", "PATCH", "APPLY", "DELETE"}, l["verb"]) {
			continue
		}
		key := l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		out[key] += s.GetCounter().GetValue()
	}
	return out
}

// printWrites says how many bucket writes a phase's creates cost, and the
// API server's writes of quotakeeper's kinds: on a busy machine each one is
// API server CPU (docs/design/observed-usage.md).
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
	if n := after.leased - before.leased; n > 0 {
		h.printf("    admitted inside capacity leases: %.0f (no synchronous write)\n", n)
	}
	var api []string
	for _, key := range slices.Sorted(maps.Keys(after.api)) {
		if n := after.api[key] - before.api[key]; n > 0 {
			api = append(api, fmt.Sprintf("%s %.0f", key, n))
		}
	}
	if len(api) > 0 {
		h.printf("    API server writes of quotakeeper's kinds: %s\n", strings.Join(api, ", "))
	}
}
