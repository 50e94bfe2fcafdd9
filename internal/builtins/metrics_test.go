package builtins_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
)

// Admission decisions are counted by result, reservations timed, and every
// halt counted by builtin and cause; quota.usage decides nothing.
func TestCallsAreCountedByResultAndHaltCause(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterGatekeeper(reg); err != nil {
		t.Fatal(err)
	}
	before := samples(t, reg)
	useLedger(t, ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: 1})
	query := map[string]any{"consumer": map[string]any{"kind": "Namespace", "name": "team-a"}, "resourceType": "core/pods"}
	mustEval(t, "quota.reserve(input)", claim("c1", pods(teamA, 1)))
	mustEval(t, "quota.reserve(input)", claim("c2", pods(teamA, 1)))
	mustEval(t, "quota.usage(input)", query)
	_, err := eval(t, "quota.reserve(input)", claim("c3", pods(teamA, -1)))
	haltMessage(t, err)
	_, err = eval(t, `quota.quantity("1Gi", "parsecs")`, nil)
	haltMessage(t, err)
	useEnv(t, func(env *builtins.Env) { env.Ledger = ledger.New(brokenStore{}, ledger.NewGrantSet()) })
	_, err = eval(t, "quota.reserve(input)", claim("c5", pods(teamA, 1)))
	haltMessage(t, err)
	useEnv(t, func(env *builtins.Env) {
		env.Ledger, env.Deadline = ledger.New(stalledStore{}, ledger.NewGrantSet()), 50*time.Millisecond
	})
	_, err = eval(t, "quota.reserve(input)", claim("c6", pods(teamA, 1)))
	haltMessage(t, err)
	useEnv(t, func(env *builtins.Env) { env.Ledger = nil })
	_, err = eval(t, "quota.reserve(input)", claim("c4", pods(teamA, 1)))
	haltMessage(t, err)
	_, err = eval(t, "quota.usage(input)", query)
	haltMessage(t, err)

	got := delta(before, samples(t, reg))
	want := map[string]float64{
		`quotakeeper_admission_decisions_total{result="granted"}`:                 1,
		`quotakeeper_admission_decisions_total{result="denied"}`:                  1,
		`quotakeeper_admission_decisions_total{result="halted"}`:                  4,
		`quotakeeper_halts_total{builtin="quota.reserve",cause="ledger_error"}`:   1,
		`quotakeeper_halts_total{builtin="quota.reserve",cause="deadline"}`:       1,
		`quotakeeper_halts_total{builtin="quota.reserve",cause="invalid_input"}`:  1,
		`quotakeeper_halts_total{builtin="quota.reserve",cause="not_ready"}`:      1,
		`quotakeeper_halts_total{builtin="quota.usage",cause="not_ready"}`:        1,
		`quotakeeper_halts_total{builtin="quota.quantity",cause="invalid_input"}`: 1,
		`quotakeeper_reserve_duration_seconds_count`:                              2,
	}
	assertEqual(t, "metric changes", got, want)
}

// samples flattens reg's counters and histogram counts into one value per
// series, named as in the exposition format.
func samples(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			name := f.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[name] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[name+"_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// delta is what changed from before to after, without the unchanged.
func delta(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// A create granted inside a capacity lease is counted as leased besides
// granted; the one before it, which went the synchronous way and asked for
// the lease, only as granted. Both answer with the same decision shape.
func TestLeasedAdmissionsAreCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterGatekeeper(reg); err != nil {
		t.Fatal(err)
	}
	set := ledger.NewGrantSet()
	if err := set.Set(ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: 10000}); err != nil {
		t.Fatal(err)
	}
	store := ledger.NewMemoryStore()
	l := ledger.New(store, set, ledger.WithLeases(ledger.LeaseOptions{Holder: "gk-0", Interval: 5 * time.Millisecond}))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.RunLeases(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("giving the lease back: %v", err)
		}
	}()
	useEnv(t, func(env *builtins.Env) { env.Ledger = l })

	before := samples(t, reg)
	first := mustEval(t, "quota.reserve(input)", claim("c1", pods(teamA, 1)))
	key := ledger.NewBucketKey(teamA, "core/pods", nil)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b, _, _ := store.Get(context.Background(), key)
		if len(b.Reservations) == 2 { // c1 and the lease
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no lease after 10 s: %+v", b.Reservations)
		}
	}
	second := mustEval(t, "quota.reserve(input)", claim("c2", pods(teamA, 1)))
	for _, d := range []any{first, second} {
		if m := d.(map[string]any); m["granted"] != true {
			t.Fatalf("decision %v, want granted", m)
		}
	}
	got := delta(before, samples(t, reg))
	want := map[string]float64{
		`quotakeeper_admission_decisions_total{result="granted"}`: 2,
		`quotakeeper_leased_admissions_total`:                     1,
		`quotakeeper_reserve_duration_seconds_count`:              2,
	}
	assertEqual(t, "metric changes", got, want)
}
