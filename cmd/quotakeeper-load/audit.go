package main

import (
	"context"
	"fmt"
	"time"

	"github.com/quotakeeper/quotakeeper/internal/localcluster"
)

// Gatekeeper's audit metrics (pkg/audit/stats_reporter.go): when the last
// pass started and ended, in seconds since the epoch.
const (
	auditStartMetric = "gatekeeper_audit_last_run_time"
	auditEndMetric   = "gatekeeper_audit_last_run_end_time"
)

// afterAudit waits until Gatekeeper's audit ends a pass and returns how
// long that pass took. Audit reviews every object once per -audit-interval,
// whatever admission is doing: a pass inside one phase's creates and not
// another's would decide their ratio (a pass over (f)'s 22,000 objects
// takes seconds of CPU), so each phase starts just after one, and the pass
// is printed beside it so that its cost stays in view.
func (h *harness) afterAudit(ctx context.Context) (time.Duration, error) {
	auditor := h.c.Gatekeepers[0] // replica 0 audits, as the stock chart's one audit pod
	read := func() (start, end float64, err error) {
		m, err := auditor.Scrape(ctx)
		if err != nil {
			return 0, 0, err
		}
		start, _ = m.Gauge(auditStartMetric, nil)
		end, _ = m.Gauge(auditEndMetric, nil)
		return start, end, nil
	}
	_, ended, err := read()
	if err != nil {
		return 0, err
	}
	var took time.Duration
	err = localcluster.Poll(ctx, 2*h.cfg.audit+time.Minute, "a Gatekeeper audit pass to end", func() error {
		start, end, err := read()
		if err != nil {
			return err
		}
		if end <= ended || start > end {
			return fmt.Errorf("last pass started %.0f, ended %.0f", start, end)
		}
		took = time.Duration((end - start) * float64(time.Second))
		return nil
	})
	return took.Round(10 * time.Millisecond), err
}
