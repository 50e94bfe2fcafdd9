package observer_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
	"github.com/quotakeeper/quotakeeper/internal/observer"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// TestObserverRecoversAPanicAndCountsOn: evaluating one object panics,
// in the initial load and on every retry after it; the observer starts,
// every panic is recovered, counted and logged with its stack, and the
// other objects, present before and created after, are counted exactly.
// Once that object evaluates again, it is counted too.
func TestObserverRecoversAPanicAndCountsOn(t *testing.T) {
	env, ctx := startControlPlane(t, "team-a", "team-b")
	k8s := env.Client
	mustCreate := func(obj client.Object) {
		t.Helper()
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
	}
	boom := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "boom"}}
	mustCreate(boom)
	mustCreate(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "cm-1"}})
	installPolicy(ctx, t, env)

	reg := prometheus.NewRegistry()
	if err := metrics.RegisterManager(reg, k8s); err != nil {
		t.Fatal(err)
	}
	evaluateErrors := func() float64 {
		return counter(t, reg, "quotakeeper_observer_errors_total", "operation", "evaluate")
	}
	reconcilePanics := func() float64 {
		return counter(t, ctrlmetrics.Registry, "controller_runtime_reconcile_panics_total", "controller", "observer-evaluate")
	}
	errorsBefore, panicsBefore := evaluateErrors(), reconcilePanics()

	var panicking atomic.Bool
	panicking.Store(true)
	var panics atomic.Int64
	logs := &logLines{}
	w, _ := startObserverWith(ctx, t, env, observerSetup{
		manager: func(o *ctrl.Options) { o.Logger = funcr.New(logs.add, funcr.Options{}) },
		observer: func(o *observer.Observer) {
			observer.BeforeEvaluate(o, func(kind, namespace, name string) {
				if kind == "ConfigMap" && namespace == "team-a" && name == "boom" && panicking.Load() {
					panics.Add(1)
					panic("evaluating team-a/boom")
				}
			})
		},
	})
	counted := func(c ledger.Consumer, resourceType string, want figures) {
		t.Helper()
		testenv.Eventually(t, wait, fmt.Sprintf("observation of %s/%s %s", c.Kind, c.Name, resourceType), func() error {
			if diff := cmp.Diff(want, w.figures(ledger.NewBucketKey(c, resourceType, nil))); diff != "" {
				return fmt.Errorf("(-want +got):\n%s", diff)
			}
			return nil
		})
		eventuallyStatus(t, k8s, c, resourceType, want)
	}
	teamA, teamB := namespaceConsumer("team-a"), namespaceConsumer("team-b")

	// boom panicked in the initial load: the observer started anyway.
	counted(teamA, rtNamespace, figures{Allocated: 1, Count: 1, Namespaces: []nsUsage{{"team-a", 1}}})

	// boom's retries panic too; the controller counts on.
	mustCreate(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "cm-2"}})
	mustCreate(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "cm-3"}})
	counted(teamA, rtNamespace, figures{Allocated: 2, Count: 2, Namespaces: []nsUsage{{"team-a", 2}}})
	counted(teamB, rtNamespace, figures{Allocated: 1, Count: 1, Namespaces: []nsUsage{{"team-b", 1}}})
	counted(org("acme"), rtOrg, figures{Allocated: 3, Count: 3, Namespaces: []nsUsage{{"team-a", 2}, {"team-b", 1}}})

	// Every panic was recovered as the item's failure: counted in the
	// controller's metric and the observer's, logged with its stack.
	testenv.Eventually(t, wait, "boom retried with backoff", func() error {
		if n := panics.Load(); n < 3 {
			return fmt.Errorf("%d panics, want the initial load's and the controller's retries", n)
		}
		return nil
	})
	if got := reconcilePanics() - panicsBefore; got < 3 {
		t.Errorf("controller_runtime_reconcile_panics_total{controller=observer-evaluate} grew %v, want at least 3", got)
	}
	if got := evaluateErrors() - errorsBefore; got < 3 {
		t.Errorf("quotakeeper_observer_errors_total{operation=evaluate} grew %v, want at least 3", got)
	}
	for what, want := range map[string][]string{
		"the panic with its stack": {`"msg"="Observed a panic"`, `"panic"="evaluating team-a/boom"`, `"controller"="observer-evaluate"`,
			`"name"="boom"`, "processObject"},
		"the initial load's failure": {`"msg"="evaluating"`, `"error"="panic: evaluating team-a/boom [recovered]"`, `"name"="boom"`},
		"the controller's failure": {`"msg"="Reconciler error"`, `"error"="panic: evaluating team-a/boom [recovered]"`,
			`"controller"="observer-evaluate"`, `"kind"="ConfigMap"`, `"namespace"="team-a"`, `"name"="boom"`},
	} {
		if !logs.has(want...) {
			t.Errorf("no log of %s: a line with %q", what, want)
		}
	}

	// boom evaluates again (its event comes before its backoff ends) and
	// is counted.
	panicking.Store(false)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(boom), boom); err != nil {
		t.Fatal(err)
	}
	boom.Labels = map[string]string{"touched": "true"}
	if err := k8s.Update(ctx, boom); err != nil {
		t.Fatal(err)
	}
	counted(teamA, rtNamespace, figures{Allocated: 3, Count: 3, Namespaces: []nsUsage{{"team-a", 3}}})
	counted(org("acme"), rtOrg, figures{Allocated: 4, Count: 4, Namespaces: []nsUsage{{"team-a", 3}, {"team-b", 1}}})
}

// counter is the value of the counter name with label=value in g.
func counter(t *testing.T, g prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// logLines records what a funcr logger writes.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

// has reports whether one line holds every part.
func (l *logLines) has(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
