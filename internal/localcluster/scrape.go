package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics are one scrape of a process's Prometheus endpoint, by family name.
type Metrics map[string]*dto.MetricFamily

// Scrape reads the process's Prometheus endpoint (Metrics).
func (p *Process) Scrape(ctx context.Context) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Metrics, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	if p.MetricsToken != "" {
		req.Header.Set("Authorization", "Bearer "+p.MetricsToken)
	}
	resp, err := p.scrapeClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", p.Name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", p.Name, resp.Status)
	}
	m, err := ParseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", p.Name, err)
	}
	return m, nil
}

// scrapeClient is the client Scrape uses: with MetricsCA one that trusts
// it, made once per process so its connections are reused rather than a
// transport (and its idle connections) left behind by every scrape.
func (p *Process) scrapeClient() *http.Client {
	if p.MetricsCA == nil {
		return http.DefaultClient
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.metricsClient == nil {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(p.MetricsCA)
		p.metricsClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	}
	return p.metricsClient
}

// ParseMetrics reads Prometheus's text format.
func ParseMetrics(r io.Reader) (Metrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(r)
}

// Counter sums the counter name's series that carry labels (nil: every
// series). A family not exported yet counts 0.
func (m Metrics) Counter(name string, labels map[string]string) float64 {
	var sum float64
	for _, s := range m[name].GetMetric() {
		if hasLabels(s, labels) {
			sum += s.GetCounter().GetValue()
		}
	}
	return sum
}

// Gauge is the value of the gauge name's first series that carries labels.
func (m Metrics) Gauge(name string, labels map[string]string) (float64, bool) {
	for _, s := range m[name].GetMetric() {
		if hasLabels(s, labels) {
			return s.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// Histogram sums the observations of the histogram name's series: how
// many, and their total.
func (m Metrics) Histogram(name string) (count uint64, sum float64) {
	for _, s := range m[name].GetMetric() {
		count += s.GetHistogram().GetSampleCount()
		sum += s.GetHistogram().GetSampleSum()
	}
	return count, sum
}

// hasLabels reports whether s carries every label of want.
func hasLabels(s *dto.Metric, want map[string]string) bool {
	found := 0
	for _, l := range s.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			found++
		}
	}
	return found == len(want)
}

// Buckets are the histogram name's cumulative bucket counts summed over its
// series, by upper bound, with the sample count under +Inf: what a
// quantile over the observations between two scrapes is computed from.
func (m Metrics) Buckets(name string) map[float64]uint64 {
	out := map[float64]uint64{}
	for _, s := range m[name].GetMetric() {
		h := s.GetHistogram()
		for _, b := range h.GetBucket() {
			// The text format lists le="+Inf" too; it is the sample
			// count, taken once below.
			if !math.IsInf(b.GetUpperBound(), 1) {
				out[b.GetUpperBound()] += b.GetCumulativeCount()
			}
		}
		out[math.Inf(1)] += h.GetSampleCount()
	}
	return out
}
