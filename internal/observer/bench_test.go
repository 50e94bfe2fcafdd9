package observer

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakeeper/quotakeeper/internal/counting"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// BenchmarkRebuild measures what a restarted observer spends per object
// before its first write: the constraint's Rego in observe mode plus the
// tally, on every core at once (the initial load's workers), over the
// shipped QuotaEntity template with one Organization constraint on
// ConfigMaps, as in the load run. It reports the time per object and the
// projected rebuild of 100,000 objects (issue 10's goal: 5 s), and, as the
// baseline measured in the same run, the cost of only decoding each object
// the way a list hands it over.
func BenchmarkRebuild(b *testing.B) {
	ctx := context.Background()
	p, tmpl, constraint := sampleQuotaEntity(b)
	if _, _, err := p.setTemplate(ctx, tmpl); err != nil {
		b.Fatal(err)
	}
	constraint.SetGeneration(1)
	if _, err := p.setConstraint(ctx, constraint.GroupVersionKind().GroupKind(), constraint.GetName(), constraint); err != nil {
		b.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{
		"resourcemanager.miloapis.com/organization": "acme"}}}
	mapping := &meta.RESTMapping{
		GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Resource:         schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Scope:            meta.RESTScopeNamespace,
	}
	configMap := func(i int) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprint("cm-", i), "namespace": "team-a",
				"uid": fmt.Sprint("uid-", i), "resourceVersion": fmt.Sprint(i)},
			"data": map[string]any{"k": "v"},
		}}
	}

	workers := runtime.GOMAXPROCS(0)
	run := func(n int, each func(i int)) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := w; i < n; i += workers {
					each(i)
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}

	const perRound = 2000
	var evalTime, decodeTime time.Duration
	objects := 0
	for b.Loop() {
		tally, mu := counting.NewTally(), sync.Mutex{}
		evalTime += run(perRound, func(i int) {
			u := configMap(i)
			claims, violations, err := p.evaluate(ctx, u, mapping, ns)
			if err != nil || len(violations) > 0 || len(claims) != 1 {
				b.Errorf("object %d: claims %v, violations %v, err %v", i, claims, violations, err)
				return
			}
			amounts, err := counting.Amounts([]ledger.Claim{claims[0].Claim})
			if err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			tally.Set(fmt.Sprint("ConfigMap/team-a/cm-", i), counting.Object{UID: string(u.GetUID()), Namespace: "team-a", Amounts: amounts})
			mu.Unlock()
		})
		decodeTime += run(perRound, func(i int) {
			u := configMap(i)
			if _, err := u.MarshalJSON(); err != nil {
				b.Error(err)
			}
		})
		objects += perRound
	}
	perObject := evalTime / time.Duration(objects)
	b.ReportMetric(float64(perObject.Nanoseconds()), "ns/object")
	b.ReportMetric((perObject * 100_000).Seconds(), "s/rebuild-100k")
	b.ReportMetric(float64(evalTime)/float64(decodeTime), "x-decode")
}
