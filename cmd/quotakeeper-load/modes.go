package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"
)

// The External Data mode (-modes externalData, make load GATEKEEPER=stock):
// the same phases on a stock Gatekeeper, whose QuotaEntity is the
// template's twin and asks the manager's provider, then phase (c) of both
// modes side by side.

// providerMetric is the provider's request latency histogram (package
// metrics), which the manager serves in the External Data mode.
const providerMetric = "quotakeeper_external_data_request_duration_seconds"

// providerLatency is what the provider answered during one phase.
type providerLatency struct {
	requests int
	p50, p99 string
}

// providerBuckets reads the provider's histogram from the manager; nil in
// the builtin mode or when it cannot be read.
func (h *harness) providerBuckets(ctx context.Context) map[float64]uint64 {
	if h.mode != modeExternalData || h.c.Manager == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := h.c.Manager.Scrape(ctx)
	if err != nil {
		return nil
	}
	return m.Buckets(providerMetric)
}

// providerLatency is the provider's figures between two readings of its
// histogram: the quantiles interpolated inside its buckets (about a factor
// of 1.5 wide), as Prometheus's histogram_quantile gives them.
func (h *harness) providerLatency(before, after map[float64]uint64) providerLatency {
	p50, ok := histogramQuantile(0.5, before, after)
	if !ok {
		return providerLatency{}
	}
	p99, _ := histogramQuantile(0.99, before, after)
	inf := math.Inf(1) // the sample count
	n := after[inf] - min(before[inf], after[inf])
	return providerLatency{
		requests: int(n),
		p50:      ms(time.Duration(p50 * float64(time.Second))),
		p99:      ms(time.Duration(p99 * float64(time.Second))),
	}
}

// compareModes prints phase (c) of each mode side by side per replica
// count, with the stock mode's rate as a ratio of the builtin mode's, the
// provider's p99, the failures, and whether (e) admitted exactly its limit.
func compareModes(out io.Writer, runs []*harness) {
	fmt.Fprintln(out, "\n(c) shared Organization quota, by admission mode:")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPLICAS\tMODE\tRATE/S\tRATIO TO BUILTINS\tP50\tP99\tFAILED\tPROVIDER P99\t(e) EXACT")
	builtin := map[int]*result{}
	for _, h := range runs {
		if r := h.results["c"]; r != nil && h.mode == modeBuiltins {
			builtin[h.replicas] = r
		}
	}
	for _, h := range runs {
		r := h.results["c"]
		if r == nil {
			continue
		}
		b := builtin[h.replicas]
		provider := "-"
		if h.mode == modeExternalData {
			provider = r.provider.p99
		}
		exact := "not run"
		if e := h.results["e"]; e != nil {
			exact = map[bool]string{true: "yes", false: "NO"}[e.exact && e.settled]
		}
		fmt.Fprintf(tw, "%d\t%s\t%.1f\t%s\t%s\t%s\t%d\t%s\t%s\n", h.replicas, h.mode, r.rate(),
			ratio(r.rate(), b.rateOrZero(), true, b != nil), r.p(50), r.p(99), r.failed(), provider, exact)
	}
	_ = tw.Flush()
}

// rateOrZero is r's rate, zero for no result.
func (r *result) rateOrZero() float64 {
	if r == nil {
		return 0
	}
	return r.rate()
}
