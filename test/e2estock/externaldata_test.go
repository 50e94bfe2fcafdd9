package e2estock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/frameworks/constraint/pkg/apis/externaldata/unversioned"
	frameworks "github.com/open-policy-agent/frameworks/constraint/pkg/externaldata"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotakeeper/quotakeeper/api/ledgerconv"
	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/claimpolicies"
	"github.com/quotakeeper/quotakeeper/counted"
	"github.com/quotakeeper/quotakeeper/externaldata"
	"github.com/quotakeeper/quotakeeper/ledger"
	quotarego "github.com/quotakeeper/quotakeeper/rego"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// On a stock Gatekeeper, a QuotaEntity admits up to its limit and denies
// the next create with exactly the message the builtin mode gives
// (test/e2e's TestBypass words the same denial); a dry run at the limit is
// denied alike and reserves nothing; and the bucket ends exact: allocated
// equals the live objects, no reservation left.
func TestEntityQuotaOnStockGatekeeper(t *testing.T) {
	const ns, rt, name = "stock-entity", "e2e.quota/stock-configmaps", "stock-entity"
	consumer := setUp(t, ns, rt, name, 2)

	mustAdmit(t, ns, "cm-1")
	mustAdmit(t, ns, "cm-2")
	// The observer counts the twin's constraint with the builtins linked
	// into the manager (rego.ForBuiltins) and folds both reservations.
	waitExact(t, ns, consumer, rt, 2)

	want := fmt.Sprintf(`admission webhook "validation.gatekeeper.sh" denied the request: [%s] quota exceeded for Namespace %s: requested 1 of %s, available 0 of 2 (allocated 2, reserved 0)%s`,
		name, ns, rt, seeEffective(ns, consumer, rt))
	if err := createConfigMap(ns, "cm-3"); err == nil || err.Error() != want {
		t.Fatalf("cm-3 past the limit: got %v\nwant %s", err, want)
	}
	if err := createConfigMap(ns, "cm-3", client.DryRunAll); err == nil || err.Error() != want {
		t.Fatalf("cm-3 past the limit, dry run: got %v\nwant %s", err, want)
	}
	waitExact(t, ns, consumer, rt, 2)

	// A delete returns quota (the observer), and the next create gets in.
	if err := cluster.Client.Delete(context.Background(), configMap(ns, "cm-1")); err != nil {
		t.Fatal(err)
	}
	waitExact(t, ns, consumer, rt, 1)
	// A dry run with room is admitted and reserves nothing.
	if err := createConfigMap(ns, "cm-4", client.DryRunAll); err != nil {
		t.Fatalf("cm-4 dry run with room: %v", err)
	}
	if st := bucket(t, consumer, rt); st.Reserved != 0 || len(st.Reservations) != 0 {
		t.Fatalf("a dry run reserved: reserved %d reservations %+v", st.Reserved, st.Reservations)
	}
	mustAdmit(t, ns, "cm-4")
	waitExact(t, ns, consumer, rt, 2)
}

// A provider that is down denies every create a quota constraint matches,
// in plain words (fail closed, never the silent allow of an unchecked
// system_error), reserves nothing, and admission resumes once it is back.
func TestProviderDownDeniesInPlainWords(t *testing.T) {
	const ns, rt, name = "stock-down", "e2e.quota/stock-down-configmaps", "stock-down"
	consumer := setUp(t, ns, rt, name, 5)
	mustAdmit(t, ns, "cm-1")
	waitExact(t, ns, consumer, rt, 1)

	cluster.Manager.Stop()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = cluster.Restart(context.Background(), cluster.Manager)
		}
	})
	prefix := fmt.Sprintf(`admission webhook "validation.gatekeeper.sh" denied the request: [%s] quota cannot decide: quotakeeper's External Data provider did not answer (failed to send external data request: Post "https://%s/v1/quota": `,
		name, cluster.ExternalDataAddr())
	const suffix = "); the request is denied and nothing was reserved. Retry in a minute; if it keeps failing, tell your platform team (docs/troubleshooting.md#quota-cannot-decide)"
	err := createConfigMap(ns, "cm-2")
	if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.HasSuffix(err.Error(), suffix) {
		t.Fatalf("cm-2 with the provider down: got %v\nwant %s...%s", err, prefix, suffix)
	}

	if err := cluster.Restart(context.Background(), cluster.Manager); err != nil {
		t.Fatal(err)
	}
	restarted = true
	testenv.Eventually(t, time.Minute, "cm-2 admitted once the provider is back", func() error {
		return createConfigMap(ns, "cm-2")
	})
	waitExact(t, ns, consumer, rt, 2)
}

// A ClaimCreationPolicy on a stock Gatekeeper: its QuotaClaimPolicy
// constraint's twin asks the provider to render the policy
// (quota.policy_claim) and to reserve what it claims, and the third object
// is denied with the builtin mode's message (test/e2e's
// TestClaimCreationPolicyAdmitsUpToTheGrant).
func TestClaimCreationPolicyOnStockGatekeeper(t *testing.T) {
	const ns, rt, name = "stock-ccp", "e2e.quota/stock-ccp-configmaps", "stock-ccp-configmaps"
	ctx := context.Background()
	create(t, builders.Namespace(ns).Obj())
	register(t, rt)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	g := builders.Grant(name, ns).Consumer(consumer).Allowance(rt, 2).Obj()
	create(t, g)
	waitActive(t, g)
	p := builders.ClaimPolicy(name, "v1", "ConfigMap",
		quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: "{{ trigger.metadata.namespace }}"}).
		Condition(`trigger.metadata.namespace == "`+ns+`"`).
		Request(rt, intstr.FromInt32(1)).Obj()
	create(t, p)
	testenv.Eventually(t, time.Minute, "ClaimCreationPolicy "+name+" Ready", func() error {
		got := &quotav1alpha1.ClaimCreationPolicy{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			return err
		}
		if !quotav1alpha1.IsTrue(got.Status.Conditions, quotav1alpha1.ConditionReady, got.Generation) {
			return fmt.Errorf("conditions %+v", got.Status.Conditions)
		}
		return nil
	})
	if err := cluster.WaitEnforced(ctx, 2*time.Minute, claimpolicies.ConstraintGVK, name); err != nil {
		t.Fatal(err)
	}

	mustAdmit(t, ns, "cm-1")
	mustAdmit(t, ns, "cm-2")
	waitExact(t, ns, consumer, rt, 2)
	want := fmt.Sprintf(`admission webhook "validation.gatekeeper.sh" denied the request: [%s] quota exceeded for Namespace %s: requested 1 of %s, available 0 of 2 (allocated 2, reserved 0)%s`,
		name, ns, rt, seeEffective(ns, consumer, rt))
	if err := createConfigMap(ns, "cm-3"); err == nil || err.Error() != want {
		t.Fatalf("cm-3 past the grant: got %v\nwant %s", err, want)
	}
	waitExact(t, ns, consumer, rt, 2)
}

// Creates racing through both Gatekeeper replicas for the last units of
// one bucket are admitted exactly up to the limit: each provider call's
// reservation is a compare-and-swap on the bucket, so no two admissions
// share one unit, and the bucket ends exact.
func TestConcurrentCreatesAdmitExactlyTheLimit(t *testing.T) {
	const ns, rt, name = "stock-race", "e2e.quota/stock-race-configmaps", "stock-race"
	const limit, creators = 10, 24
	consumer := setUp(t, ns, rt, name, limit)
	want := fmt.Sprintf(`admission webhook "validation.gatekeeper.sh" denied the request: [%s] quota exceeded for Namespace %s: requested 1 of %s, available 0 of %d`, name, ns, rt, limit)
	var wg sync.WaitGroup
	results := make(chan error, creators)
	for i := range creators {
		wg.Go(func() { results <- createConfigMap(ns, fmt.Sprintf("cm-%d", i)) })
	}
	wg.Wait()
	close(results)
	admitted := 0
	for err := range results {
		switch {
		case err == nil:
			admitted++
		case !strings.HasPrefix(err.Error(), want):
			t.Errorf("a create denied otherwise than for quota: %v", err)
		}
	}
	if admitted != limit {
		t.Errorf("%d of %d racing creates admitted, want exactly the limit %d", admitted, creators, limit)
	}
	waitExact(t, ns, consumer, rt, limit)
}

// setUp makes namespace ns, registers rt counted per namespace, grants ns
// limit of it, and constrains its ConfigMaps with a QuotaEntity.
func setUp(t *testing.T, ns, rt, name string, limit int64) quotav1alpha1.ConsumerRef {
	t.Helper()
	ctx := context.Background()
	create(t, builders.Namespace(ns).Obj())
	register(t, rt)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	g := builders.Grant(name, ns).Consumer(consumer).Allowance(rt, limit).Obj()
	create(t, g)
	waitActive(t, g)
	c := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "constraints.gatekeeper.sh/v1beta1",
		"kind":       "QuotaEntity",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"match": map[string]any{
				"kinds":      []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"ConfigMap"}}},
				"namespaces": []any{ns},
			},
			"parameters": map[string]any{"resourceType": rt},
		},
	}}
	if err := cluster.Apply(ctx, time.Minute, c); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitEnforced(ctx, 2*time.Minute, c.GroupVersionKind(), name); err != nil {
		t.Fatal(err)
	}
	return consumer
}

// register registers rt, counted per namespace, claimed by ConfigMaps.
func register(t *testing.T, rt string) {
	t.Helper()
	reg := builders.Registration(strings.NewReplacer("/", "-", ".", "-").Replace(rt), rt).
		Consumer(quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"}).Type(quotav1alpha1.RegistrationTypeEntity).
		BaseUnit("count").ClaimingResources(quotav1alpha1.GroupKind{Kind: "ConfigMap"}).Obj()
	create(t, reg)
	waitActive(t, reg)
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := cluster.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// waitActive waits until a registration or grant is Active.
func waitActive(t *testing.T, obj client.Object) {
	t.Helper()
	testenv.Eventually(t, time.Minute, fmt.Sprintf("%T %s Active", obj, obj.GetName()), func() error {
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		var conditions []metav1.Condition
		switch o := obj.(type) {
		case *quotav1alpha1.ResourceRegistration:
			conditions = o.Status.Conditions
		case *quotav1alpha1.ResourceGrant:
			conditions = o.Status.Conditions
		}
		if !meta.IsStatusConditionTrue(conditions, quotav1alpha1.ConditionActive) {
			return fmt.Errorf("conditions %+v", conditions)
		}
		return nil
	})
}

func configMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
}

func createConfigMap(ns, name string, opts ...client.CreateOption) error {
	return cluster.Client.Create(context.Background(), configMap(ns, name), opts...)
}

func mustAdmit(t *testing.T, ns, name string) {
	t.Helper()
	if err := createConfigMap(ns, name); err != nil {
		t.Fatalf("ConfigMap %s/%s denied: %v", ns, name, err)
	}
}

func seeEffective(ns string, consumer quotav1alpha1.ConsumerRef, rt string) string {
	return fmt.Sprintf("; see EffectiveResourceGrant %s/%s (kubectl quota usage -n %s)",
		ns, quotav1alpha1.EffectiveResourceGrantName(consumer, rt), ns)
}

func bucket(t *testing.T, consumer quotav1alpha1.ConsumerRef, rt string) quotav1alpha1.AllowanceBucketStatus {
	t.Helper()
	key := ledger.NewBucketKey(ledgerconv.Consumer(consumer), rt, nil)
	obj := &quotav1alpha1.AllowanceBucket{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{
		Namespace: quotav1alpha1.BucketNamespace(consumer, quotav1alpha1.DefaultSystemNamespace), Name: key.Name(),
	}, obj); err != nil {
		t.Fatal(err)
	}
	return obj.Status
}

// waitExact waits until the bucket is exact: allocated equals want, the
// ConfigMaps that exist in ns (an independent count), and no reservation
// is left.
func waitExact(t *testing.T, ns string, consumer quotav1alpha1.ConsumerRef, rt string, want int64) {
	t.Helper()
	testenv.Eventually(t, time.Minute, fmt.Sprintf("bucket %s %s exact at %d", ns, rt, want), func() error {
		var live corev1.ConfigMapList
		if err := cluster.Client.List(context.Background(), &live, client.InNamespace(ns)); err != nil {
			return err
		}
		counted := int64(0)
		for _, cm := range live.Items {
			if cm.Name != "kube-root-ca.crt" {
				counted++
			}
		}
		st := bucket(t, consumer, rt)
		if st.Allocated != want || counted != want || st.Reserved != 0 || len(st.Reservations) != 0 || int64(st.ClaimCount) != want {
			return fmt.Errorf("allocated %d claimCount %d reserved %d reservations %+v, %d ConfigMaps live; want %d each and none reserved",
				st.Allocated, st.ClaimCount, st.Reserved, st.Reservations, counted, want)
		}
		return nil
	})
}

// The provider answers a quota.reserve within Gatekeeper's timeout for it
// (the Provider's spec.timeout, 5 s): 200 reservations, 4 at a time, on a
// real bucket, as Gatekeeper sends them (the frameworks' client, TLS with
// the Provider's CA bundle). It logs the latencies; their p99 is the
// figure docs/operations.md quotes.
func TestProviderAnswersWithinItsTimeout(t *testing.T) {
	const ns, rt, name = "stock-latency", "e2e.quota/stock-latency-configmaps", "stock-latency"
	const calls, concurrency = 200, 4
	consumer := setUp(t, ns, rt, name, calls)
	ctx := context.Background()
	provider := installedProvider(t)
	version := policyVersion(t, name)

	latencies := make([]time.Duration, calls)
	errs := make(chan error, calls)
	var wg sync.WaitGroup
	next := make(chan int)
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				uid := fmt.Sprintf("latency-%d", i)
				claim := map[string]any{
					"id":            uid,
					"object":        map[string]any{"apiGroup": "", "kind": "ConfigMap", "namespace": ns, "name": uid, "uid": uid},
					"requests":      []any{map[string]any{"consumer": map[string]any{"apiGroup": "", "kind": "Namespace", "name": ns, "namespace": ""}, "resourceType": rt, "amount": 1, "dimensions": map[string]any{}}},
					"policyVersion": version,
				}
				key, err := json.Marshal(externaldata.Key{Builtin: "quota.reserve", Args: []any{claim}, Request: "req-" + uid})
				if err != nil {
					errs <- err
					continue
				}
				start := time.Now()
				resp, _, err := frameworks.DefaultSendRequestToProvider(ctx, provider, []string{string(key)}, nil)
				latencies[i] = time.Since(start)
				switch {
				case err != nil:
					errs <- err
				case len(resp.Response.Items) != 1 || resp.Response.Items[0].Error != "":
					errs <- fmt.Errorf("call %d: %+v", i, resp.Response)
				default:
					if d, _ := resp.Response.Items[0].Value.(map[string]any); d["granted"] != true {
						errs <- fmt.Errorf("call %d not granted: %v", i, d)
					}
				}
			}
		})
	}
	for i := range calls {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	slices.Sort(latencies)
	p50, p99, maxL := latencies[calls/2], latencies[calls*99/100-1], latencies[calls-1]
	t.Logf("provider quota.reserve latency over %d calls, %d at a time: p50 %s, p99 %s, max %s", calls, concurrency, p50, p99, maxL)
	if timeout := time.Duration(provider.Spec.Timeout) * time.Second; p99 >= timeout {
		t.Errorf("p99 %s is not within the Provider's timeout %s", p99, timeout)
	}
	if st := bucket(t, consumer, rt); st.Reserved != calls {
		t.Errorf("reserved %d after %d granted reservations", st.Reserved, calls)
	}
}

// installedProvider is Gatekeeper's Provider of the quotakeeper provider,
// as installed (read unstructured: the client's scheme lacks the kind).
func installedProvider(t *testing.T) *unversioned.Provider {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "externaldata.gatekeeper.sh", Version: "v1beta1", Kind: "Provider"})
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: quotarego.ExternalDataProvider}, u); err != nil {
		t.Fatal(err)
	}
	p := &unversioned.Provider{ObjectMeta: metav1.ObjectMeta{Name: u.GetName()}}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object["spec"].(map[string]any), &p.Spec); err != nil {
		t.Fatal(err)
	}
	return p
}

// policyVersion is the version the manager stamped into the constraint's
// parameters, which a claim carries (package counted).
func policyVersion(t *testing.T, name string) string {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "constraints.gatekeeper.sh", Version: "v1beta1", Kind: "QuotaEntity"})
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: name}, u); err != nil {
		t.Fatal(err)
	}
	v, _, _ := unstructured.NestedString(u.Object, "spec", "parameters", counted.Field)
	if v == "" {
		t.Fatalf("constraint %s has no parameters.%s", name, counted.Field)
	}
	return v
}
