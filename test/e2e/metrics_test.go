package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// The metrics are scraped from the real processes: Gatekeeper's
// --prometheus-port (the plugin registers on the default registry, which
// Gatekeeper's exporter serves) and the manager's --metrics-bind-address;
// on a stock Gatekeeper the admission metrics are the manager's, whose
// provider decides. After a grant of 3 and four creates, the deciding
// processes together count 3 granted and 1 denied decisions, and the
// manager reports the bucket at limit 3, used 3, reserved 0, available 0.
func TestMetrics(t *testing.T) {
	const ns, rt = "e2e-metrics", "e2e.quota/metrics-configmaps"
	namespace(t, ns, nil)
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	grant(t, "configmaps", consumer, rt, 3)
	quotaEntity(t, "e2e-metrics", []string{ns}, map[string]any{"resourceType": rt})

	// The counters are cumulative over the whole suite: compare with a
	// scrape taken just before the creates.
	before := scrapeDeciders(t)
	lagBefore := histogramCount(scrape(t, cluster.Manager), "quotakeeper_observer_lag_seconds")
	for i := 1; i <= 3; i++ {
		mustAdmit(t, ns, fmt.Sprintf("cm-%d", i))
	}
	mustDeny(t, ns, "cm-4", "available 0 of 3")
	after := scrapeDeciders(t)

	decisions := func(fams []localcluster.Metrics, result string) float64 {
		var sum float64
		for _, f := range fams {
			sum += f.Counter("quotakeeper_admission_decisions_total", map[string]string{"result": result})
		}
		return sum
	}
	for result, want := range map[string]float64{"granted": 3, "denied": 1, "halted": 0} {
		if got := decisions(after, result) - decisions(before, result); got != want {
			t.Errorf("quotakeeper_admission_decisions_total{result=%q} rose by %v over the replicas, want %v", result, got, want)
		}
	}
	reserves := func(fams []localcluster.Metrics) uint64 {
		var n uint64
		for _, f := range fams {
			n += histogramCount(f, "quotakeeper_reserve_duration_seconds")
		}
		return n
	}
	if got := reserves(after) - reserves(before); got != 4 {
		t.Errorf("quotakeeper_reserve_duration_seconds counted %d more reservations, want 4", got)
	}
	if stockMode {
		// Each create's twin asked the provider at least once.
		const provider = "quotakeeper_external_data_request_duration_seconds"
		if got := histogramCount(after[0], provider) - histogramCount(before[0], provider); got < 4 {
			t.Errorf("%s counted %d more requests, want at least 4", provider, got)
		}
	}
	// Each grant wrote a reservation in a group-commit batch of its own
	// (the creates were one after another).
	batches := func(fams []localcluster.Metrics) uint64 {
		var n uint64
		for _, f := range fams {
			n += histogramCount(f, "quotakeeper_group_commit_batch_size")
		}
		return n
	}
	if got := batches(after) - batches(before); got < 3 {
		t.Errorf("quotakeeper_group_commit_batch_size counted %d more batches, want at least 3", got)
	}
	for i, f := range after {
		if _, ok := f["quotakeeper_bucket_write_conflicts_total"]; !ok {
			t.Errorf("%s exports no quotakeeper_bucket_write_conflicts_total", deciders()[i].Name)
		}
	}

	waitBucket(t, consumer, rt, 3, 0)
	key := bucketKey(consumer, rt)
	want := map[string]float64{
		"quotakeeper_bucket_limit": 3, "quotakeeper_bucket_used": 3, "quotakeeper_bucket_reserved": 0,
		"quotakeeper_bucket_available": 0, "quotakeeper_bucket_expired_reservations": 0,
	}
	labels := map[string]string{
		"consumer_kind": "Namespace", "consumer": ns, "resource_type": rt, "namespace": key.Namespace, "bucket": key.Name,
	}
	testenv.Eventually(t, time.Minute, "the manager's bucket gauges", func() error {
		fams := scrape(t, cluster.Manager)
		for name, v := range want {
			got, ok := fams.Gauge(name, labels)
			if !ok {
				return fmt.Errorf("no %s%v", name, labels)
			}
			if got != v {
				return fmt.Errorf("%s%v = %v, want %v", name, labels, got, v)
			}
		}
		return nil
	})
	fams := scrape(t, cluster.Manager)
	if got := histogramCount(fams, "quotakeeper_observer_lag_seconds"); got <= lagBefore {
		t.Errorf("quotakeeper_observer_lag_seconds counted %d writes, %d before the creates: want more", got, lagBefore)
	}
	if _, ok := fams["controller_runtime_reconcile_errors_total"]; !ok {
		t.Error("the manager exports no controller_runtime_reconcile_errors_total")
	}
}

// The manager serves metrics over HTTPS to callers the API server
// authenticates and authorizes, as the chart installs it: the bed's
// scraper, a ServiceAccount bound to quotakeeper-metrics-reader as a
// Prometheus's is, reads them; no token is refused as unauthenticated, and
// the token of a ServiceAccount without the binding as forbidden.
func TestManagerMetricsNeedAnAuthorizedToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if !strings.HasPrefix(cluster.Manager.Metrics, "https://") || cluster.Manager.MetricsToken == "" {
		t.Fatalf("the manager's metrics at %s, token set %t: want HTTPS with a token (the chart's metrics.secure)", cluster.Manager.Metrics, cluster.Manager.MetricsToken != "")
	}
	if _, err := cluster.Manager.Scrape(ctx); err != nil {
		t.Fatalf("the scraper bound to quotakeeper-metrics-reader: %v", err)
	}
	stranger := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: localcluster.MetricsReader.Namespace, Name: "e2e-metrics-stranger"}}
	create(t, stranger)
	strangerToken, err := localcluster.ServiceAccountToken(ctx, cluster.Client, stranger, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for who, c := range map[string]struct{ token, want string }{
		"no token":                   {"", "401 Unauthorized"},
		"a ServiceAccount not bound": {strangerToken, "403 Forbidden"},
	} {
		p := &localcluster.Process{Name: "quotakeeper-manager", Metrics: cluster.Manager.Metrics, MetricsCA: cluster.Manager.MetricsCA, MetricsToken: c.token}
		if _, err := p.Scrape(ctx); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: scrape %v, want %s", who, err, c.want)
		}
	}
}

// scrape reads a process's Prometheus endpoint.
func scrape(t *testing.T, p *localcluster.Process) localcluster.Metrics {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fams, err := p.Scrape(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// deciders are the processes whose quota builtins decide admissions:
// every Gatekeeper replica built with the plugin, or on a stock Gatekeeper
// the manager, which serves the External Data provider.
func deciders() []*localcluster.Process {
	if stockMode {
		return []*localcluster.Process{cluster.Manager}
	}
	return cluster.Gatekeepers
}

func scrapeDeciders(t *testing.T) []localcluster.Metrics {
	t.Helper()
	var out []localcluster.Metrics
	for _, p := range deciders() {
		out = append(out, scrape(t, p))
	}
	return out
}

// histogramCount is the number of observations of the histogram name.
func histogramCount(m localcluster.Metrics, name string) uint64 {
	n, _ := m.Histogram(name)
	return n
}

// leasedSince returns, with capacity leases on, a check that creates were
// admitted inside leases from now on (quotakeeper_leased_admissions_total
// over the Gatekeeper replicas; a replica restarted since counts from its
// start): a run with leases on that never used one proved nothing about
// them. With leases off the check does nothing.
func leasedSince(t *testing.T) (check func()) {
	t.Helper()
	if !leasesOn {
		return func() {}
	}
	count := func() []float64 {
		var out []float64
		for _, m := range scrapeDeciders(t) {
			out = append(out, m.Counter("quotakeeper_leased_admissions_total", nil))
		}
		return out
	}
	before := count()
	return func() {
		t.Helper()
		var leased float64
		for i, n := range count() {
			if i < len(before) && n >= before[i] {
				n -= before[i]
			}
			leased += n
		}
		t.Logf("capacity leases on: %.0f creates admitted inside a lease", leased)
		if leased == 0 {
			t.Errorf("capacity leases on, yet no create was admitted inside one")
		}
	}
}
