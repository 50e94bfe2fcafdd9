package observer_test

import (
	"context"
	"errors"
	"fmt"
	eventsv1 "k8s.io/api/events/v1"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/quotakeeper/quotakeeper/api/names"
	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/counted"
	"github.com/quotakeeper/quotakeeper/internal/grants"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledger/kubestore"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/internal/observer"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

const (
	sysNS       = quotav1alpha1.DefaultSystemNamespace
	rtNamespace = "core/configmaps"
	rtOrg       = "core/configmaps-by-organization"
	rtWarn      = "core/configmaps-warned"
	orgLabel    = "resourcemanager.miloapis.com/organization"
	wait        = 20 * time.Second
	// resync is short so that a test can see what a resync writes.
	resync = 2 * time.Second
)

func namespaceConsumer(name string) ledger.Consumer {
	return ledger.Consumer{Kind: "Namespace", Name: name}
}
func org(name string) ledger.Consumer {
	return ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: name}
}

// TestObserverCountsTheLiveObjects runs the observer against a real
// apiserver with the shipped quotaentity template (no Gatekeeper: the
// constraint CRD is made as Gatekeeper makes it) and checks, in order, the
// behaviours of issue 10 the observer owns. Steps build on each other.
//
// The figures (allocated, claimCount, namespaces) are the ledger's Observe
// (part A); the reservation steps hold with any Observe that removes the
// listed reservations.
func TestObserverCountsTheLiveObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane; skipped in -short mode")
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(logLevel())))
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	k8s := env.Client

	mustCreate := func(obj client.Object) {
		t.Helper()
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
	}
	mustCreate(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sysNS}})
	mustCreate(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{orgLabel: "acme"}}})
	mustCreate(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Labels: map[string]string{orgLabel: "acme"}}})
	configMap := func(ns, name string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		mustCreate(cm)
		return cm
	}
	// Objects that predate the constraints.
	cm1 := configMap("team-a", "cm-1")
	cm2 := configMap("team-a", "cm-2")
	configMap("team-b", "cm-3")

	installPolicy(ctx, t, env)
	// A second quota template whose constraint kind Gatekeeper has not made
	// yet: until the observer can watch it, it writes nothing (a bucket
	// written without that kind's constraints could count less than the
	// live objects use).
	late, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "templates", "quotaallocation", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lateTemplate := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(late, &lateTemplate.Object); err != nil {
		t.Fatal(err)
	}
	mustCreate(lateTemplate)

	w, _ := startObserver(ctx, t, env, nil)
	time.Sleep(3 * time.Second)
	if _, written, err := bucketStatus(k8s, namespaceConsumer("team-a"), rtNamespace); err != nil || written {
		t.Fatalf("a bucket was written while a quota template's constraint kind could not be watched (written %t, %v)", written, err)
	}
	if _, _, err := testenv.InstallConstraintCRD(ctx, env.Config, "quotaallocation"); err != nil {
		t.Fatal(err)
	}
	// eventuallyBucket checks what the observer wrote, then what the
	// bucket's status shows.
	eventuallyBucket := func(t *testing.T, c ledger.Consumer, resourceType string, want figures) {
		t.Helper()
		key := ledger.NewBucketKey(c, resourceType, nil)
		testenv.Eventually(t, wait, fmt.Sprintf("observation of %s/%s %s", c.Kind, c.Name, resourceType), func() error {
			if diff := cmp.Diff(want, w.figures(key)); diff != "" {
				return fmt.Errorf("(-want +got):\n%s", diff)
			}
			return nil
		})
		eventuallyStatus(t, k8s, c, resourceType, want)
	}

	t.Run("objects created before the constraint are counted", func(t *testing.T) {
		eventuallyBucket(t, namespaceConsumer("team-a"), rtNamespace, figures{Allocated: 2, Count: 2, Namespaces: []nsUsage{{"team-a", 2}}})
		eventuallyBucket(t, namespaceConsumer("team-b"), rtNamespace, figures{Allocated: 1, Count: 1, Namespaces: []nsUsage{{"team-b", 1}}})
		eventuallyBucket(t, org("acme"), rtOrg, figures{Allocated: 3, Count: 3, Namespaces: []nsUsage{{"team-a", 2}, {"team-b", 1}}})
	})

	// Package counted: every constraint carries its policy version (here
	// written by the observer: no webhook runs in this suite), and a
	// version is published only once the bucket counts the objects that
	// predate it.
	t.Run("a constraint's version is published once its objects are counted", func(t *testing.T) {
		record := func() counted.Record {
			cm := &corev1.ConfigMap{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: sysNS, Name: counted.ConfigMapName}, cm); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			return counted.Record(cm.Data)
		}
		stamped := func(name string) string {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: "constraints.gatekeeper.sh", Version: "v1beta1", Kind: "QuotaEntity"})
			if err := k8s.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
				t.Fatal(err)
			}
			v, err := counted.Version(u)
			if err != nil {
				t.Fatal(err)
			}
			if got := counted.Stamped(u); got != v {
				return ""
			}
			return v
		}
		for _, name := range []string{"per-namespace", "per-organization", "warned"} {
			testenv.Eventually(t, wait, "version of "+name+" stamped and published", func() error {
				if v := stamped(name); v == "" || !record().Has(v) {
					return fmt.Errorf("stamped %q, record %v", v, record())
				}
				return nil
			})
		}

		const rtLate = "core/configmaps-late"
		late := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "constraints.gatekeeper.sh/v1beta1", "kind": "QuotaEntity",
			"metadata": map[string]any{"name": "late"},
			"spec": map[string]any{
				"match":      map[string]any{"kinds": []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"ConfigMap"}}}, "namespaces": []any{"team-a"}},
				"parameters": map[string]any{"resourceType": rtLate},
			},
		}}
		mustCreate(late)
		testenv.Eventually(t, wait, "version of late published", func() error {
			v := stamped("late")
			if v == "" || !record().Has(v) {
				return fmt.Errorf("stamped %q, not published", v)
			}
			// Published: the bucket already counts both ConfigMaps of team-a.
			st, ok, err := bucketStatus(k8s, namespaceConsumer("team-a"), rtLate)
			if err != nil || !ok {
				t.Fatalf("version published before the bucket was written (%v)", err)
			}
			if st["allocated"] != int64(2) {
				t.Fatalf("version published with the bucket at allocated %v, want 2", st["allocated"])
			}
			return nil
		})
		if err := k8s.Delete(ctx, late); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, wait, "version of late withdrawn", func() error {
			if _, ok := record()["QuotaEntity.late"]; ok {
				return errors.New("still published")
			}
			return nil
		})
	})

	t.Run("deletes return quota", func(t *testing.T) {
		if err := k8s.Delete(ctx, cm2); err != nil {
			t.Fatal(err)
		}
		eventuallyBucket(t, namespaceConsumer("team-a"), rtNamespace, figures{Allocated: 1, Count: 1, Namespaces: []nsUsage{{"team-a", 1}}})
		eventuallyBucket(t, org("acme"), rtOrg, figures{Allocated: 2, Count: 2, Namespaces: []nsUsage{{"team-a", 1}, {"team-b", 1}}})
	})

	t.Run("relabelling a namespace moves its usage", func(t *testing.T) {
		ns := &corev1.Namespace{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: "team-b"}, ns); err != nil {
			t.Fatal(err)
		}
		ns.Labels[orgLabel] = "globex"
		if err := k8s.Update(ctx, ns); err != nil {
			t.Fatal(err)
		}
		eventuallyBucket(t, org("acme"), rtOrg, figures{Allocated: 1, Count: 1, Namespaces: []nsUsage{{"team-a", 1}}})
		eventuallyBucket(t, org("globex"), rtOrg, figures{Allocated: 1, Count: 1, Namespaces: []nsUsage{{"team-b", 1}}})
	})

	long := admissionLedger(k8s, time.Hour)
	short := admissionLedger(k8s, 2*time.Second)

	t.Run("a reservation for an object that appears is folded", func(t *testing.T) {
		cm4 := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "cm-4"}}
		mustCreate(cm4)
		// What admission reserved for it; the hour-long TTL rules out expiry.
		reserve(ctx, t, long, claimFor(cm4, namespaceConsumer("team-a"), rtNamespace))
		eventuallyNoReservations(t, k8s, namespaceConsumer("team-a"), rtNamespace)
		eventuallyBucket(t, namespaceConsumer("team-a"), rtNamespace, figures{Allocated: 2, Count: 2, Namespaces: []nsUsage{{"team-a", 2}}})
	})

	t.Run("a reservation for an object that never appears expires", func(t *testing.T) {
		ghost := ledger.Claim{ID: "4f1c6a0e-ghost", Object: ledger.ObjectRef{Kind: "ConfigMap", Namespace: "team-b", Name: "ghost", UID: "4f1c6a0e-ghost"},
			Requests: []ledger.Request{{Consumer: namespaceConsumer("team-b"), ResourceType: rtNamespace, Amount: 1}}}
		reserve(ctx, t, short, ghost)
		eventuallyNoReservations(t, k8s, namespaceConsumer("team-b"), rtNamespace)
		eventuallyBucket(t, namespaceConsumer("team-b"), rtNamespace, figures{Allocated: 1, Count: 1, Namespaces: []nsUsage{{"team-b", 1}}})
		// The bucket says which reservation went, and why.
		want := "reservation 4f1c6a0e-ghost of 1 for ConfigMap team-b/ghost expired: the object was never counted " +
			"(its request failed after admission, or a later update was rejected)"
		testenv.Eventually(t, 30*time.Second, "ReservationExpired event", func() error {
			var list eventsv1.EventList
			if err := k8s.List(ctx, &list, client.InNamespace("team-b")); err != nil {
				return err
			}
			var seen []string
			for _, e := range list.Items {
				if e.Regarding.Kind == "AllowanceBucket" && e.Type == corev1.EventTypeWarning && e.Reason == "ReservationExpired" && e.Action == "Expire" && e.Note == want {
					return nil
				}
				seen = append(seen, e.Reason+": "+e.Note)
			}
			return fmt.Errorf("no ReservationExpired event; events %q", seen)
		})
	})

	t.Run("a warn constraint holds nothing", func(t *testing.T) {
		// Admission reserved under the warn constraint (Rego never sees the
		// enforcement action); once expired, nothing holds it, although
		// the object exists.
		reserve(ctx, t, short, claimFor(cm1, namespaceConsumer("team-a"), rtWarn))
		eventuallyNoReservations(t, k8s, namespaceConsumer("team-a"), rtWarn)
		eventuallyBucket(t, namespaceConsumer("team-a"), rtWarn, figures{})
	})

	// The views: one ResourceClaim per counted object and constraint
	// (each constraint here counts against one consumer), none for the
	// warn constraint, none for cm-2 (deleted) and none for cm-3's old
	// organization.
	cm3, cm4 := &corev1.ConfigMap{}, &corev1.ConfigMap{}
	for obj, name := range map[*corev1.ConfigMap]types.NamespacedName{cm1: {Namespace: "team-a", Name: "cm-1"},
		cm3: {Namespace: "team-b", Name: "cm-3"}, cm4: {Namespace: "team-a", Name: "cm-4"}} {
		if err := k8s.Get(ctx, name, obj); err != nil {
			t.Fatal(err)
		}
	}
	wantViews := map[string]viewSummary{}
	for _, v := range []viewSummary{
		wantView(cm1, namespaceConsumer("team-a"), rtNamespace), wantView(cm1, org("acme"), rtOrg),
		wantView(cm3, namespaceConsumer("team-b"), rtNamespace), wantView(cm3, org("globex"), rtOrg),
		wantView(cm4, namespaceConsumer("team-a"), rtNamespace), wantView(cm4, org("acme"), rtOrg),
	} {
		wantViews[v.Key] = v
	}
	t.Run("every counted object has a view per constraint", func(t *testing.T) {
		eventuallyViews(t, k8s, wantViews)
	})

	t.Run("a deleted view comes back and frees nothing", func(t *testing.T) {
		v := &quotav1alpha1.ResourceClaim{}
		key := wantView(cm1, namespaceConsumer("team-a"), rtNamespace).Key
		ns, name, _ := strings.Cut(key, "/")
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, v); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Delete(ctx, v); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, wait, "view "+key+" written again", func() error {
			again := &quotav1alpha1.ResourceClaim{}
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, again); err != nil {
				return err
			}
			if again.UID == v.UID {
				return errors.New("not deleted yet")
			}
			return nil
		})
		eventuallyViews(t, k8s, wantViews)
		eventuallyBucket(t, namespaceConsumer("team-a"), rtNamespace, figures{Allocated: 2, Count: 2, Namespaces: []nsUsage{{"team-a", 2}}})
	})

	t.Run("a view no object wants is removed", func(t *testing.T) {
		stray := &quotav1alpha1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "stray", Labels: map[string]string{quotav1alpha1.ViewLabel: "true"}},
			Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: ledgerconv.ConsumerRef(namespaceConsumer("team-a")),
				Requests: []quotav1alpha1.ResourceRequest{{ResourceType: rtNamespace, Amount: 5}}},
		}
		mustCreate(stray)
		testenv.Eventually(t, wait, "stray view removed", func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(stray), stray); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%w)", err)
			}
			return nil
		})
		eventuallyBucket(t, namespaceConsumer("team-a"), rtNamespace, figures{Allocated: 2, Count: 2, Namespaces: []nsUsage{{"team-a", 2}}})
	})

	t.Run("an object gone takes its views (no garbage collector runs here)", func(t *testing.T) {
		if err := k8s.Delete(ctx, cm4); err != nil {
			t.Fatal(err)
		}
		delete(wantViews, wantView(cm4, namespaceConsumer("team-a"), rtNamespace).Key)
		delete(wantViews, wantView(cm4, org("acme"), rtOrg).Key)
		eventuallyViews(t, k8s, wantViews)
		eventuallyBucket(t, namespaceConsumer("team-a"), rtNamespace, figures{Allocated: 1, Count: 1, Namespaces: []nsUsage{{"team-a", 1}}})
	})

	// What views cost, counted by the apiserver: successful ResourceClaim
	// writes (and attempts, which include conflicts with a lagging cache).
	t.Run("a view costs two writes when first counted, none on a resync, one to remove", func(t *testing.T) {
		const n = 50
		viewsBefore := len(wantViews)
		before := claimWrites(ctx, t, env)
		for i := range n {
			mustCreate(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("bulk-%d", i)}})
		}
		// Each counts against team-a and acme: two views each, each a
		// create and a status write.
		created := eventuallyClaimWrites(ctx, t, env, before, 2*2*n, viewsBefore+2*n)
		t.Logf("%d objects, %d views: %d successful ResourceClaim writes, %d attempts", n, 2*n, created.ok-before.ok, created.all-before.all)
		time.Sleep(3 * resync) // every object evaluated again, at least twice
		if again := claimWrites(ctx, t, env); again.ok != created.ok {
			t.Fatalf("resyncs wrote %d ResourceClaims, want 0", again.ok-created.ok)
		}
		for i := range n {
			if err := k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("bulk-%d", i)}}); err != nil {
				t.Fatal(err)
			}
		}
		removed := eventuallyClaimWrites(ctx, t, env, created, 2*n, viewsBefore)
		t.Logf("removing them: %d successful ResourceClaim writes, %d attempts", removed.ok-created.ok, removed.all-created.all)
	})

	// Only QuotaEntity constraints (metadata.ReadsAnnotation "metadata")
	// match ConfigMaps here: the observer holds their metadata, so large
	// ConfigMaps, here in a namespace no quota covers, do not grow the
	// manager by their size.
	t.Run("large objects cost the observer their metadata only", func(t *testing.T) {
		const n, size = 40, 900 << 10
		mustCreate(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "no-quota"}})
		heap := func() uint64 {
			// Twice: sync.Pools keep what the first collection freed
			// (the list responses' buffers) until the second.
			goruntime.GC()
			goruntime.GC()
			var m goruntime.MemStats
			goruntime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		before := heap()
		func() { // the payload is garbage once they are created
			payload := strings.Repeat("x", size)
			for i := range n {
				mustCreate(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "no-quota", Name: fmt.Sprintf("large-%d", i)}, Data: map[string]string{"payload": payload, "units": "2"}})
			}
		}()
		time.Sleep(2 * resync) // every event handled, a resync listed them
		grown := int64(heap()) - int64(before)
		t.Logf("%d ConfigMaps of %d KiB: the heap grew %d KiB", n, size>>10, grown>>10)
		if grown > n*size/4 {
			t.Fatalf("the heap grew %d KiB with %d ConfigMaps of %d KiB: the observer holds their content", grown>>10, n, size>>10)
		}

		// A QuotaAllocation reads ConfigMaps' data, in team-b only: the
		// observer now watches them whole, but holds no more than the
		// metadata of those in a namespace no constraint matches.
		const rtUnits = "example.com/units"
		units := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "constraints.gatekeeper.sh/v1beta1", "kind": "QuotaAllocation",
			"metadata": map[string]any{"name": "units"},
			"spec": map[string]any{
				"match":      map[string]any{"kinds": []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"ConfigMap"}}}, "namespaces": []any{"team-b"}},
				"parameters": map[string]any{"resourceType": rtUnits, "amount": map[string]any{"path": []any{"data", "units"}}},
			},
		}}
		before = heap()
		mustCreate(units)
		unitsOf := func(ns string) figures { return w.figures(ledger.NewBucketKey(namespaceConsumer(ns), rtUnits, nil)) }
		mustCreate(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "units-3"}, Data: map[string]string{"units": "3"}})
		// Counting it starts a whole informer of ConfigMaps, whose first
		// list carries the 36 MiB above: slow on a loaded machine.
		testenv.Eventually(t, 3*wait, "team-b's units counted", func() error {
			if got, want := unitsOf("team-b"), (figures{Allocated: 3, Count: 1, Namespaces: []nsUsage{{"team-b", 3}}}); !cmp.Equal(got, want) {
				return fmt.Errorf("%+v, want %+v", got, want)
			}
			return nil
		})
		time.Sleep(2 * resync)
		grown = int64(heap()) - int64(before)
		t.Logf("ConfigMaps watched whole, %d of %d KiB in a namespace no constraint matches: the heap grew %d KiB", n, size>>10, grown>>10)
		if grown > n*size/4 {
			t.Fatalf("the heap grew %d KiB watching ConfigMaps whole: the observer holds the content of %d ConfigMaps of %d KiB no constraint matches", grown>>10, n, size>>10)
		}

		// The constraint widened to no-quota: its ConfigMaps, cached as
		// metadata, are read whole and counted.
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(units), units); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedStringSlice(units.Object, []string{"team-b", "no-quota"}, "spec", "match", "namespaces"); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Update(ctx, units); err != nil {
			t.Fatal(err)
		}
		// Each is read and evaluated whole: 36 MiB of JSON, slow under
		// the race detector.
		testenv.Eventually(t, 2*time.Minute, "no-quota's units counted", func() error {
			if got, want := unitsOf("no-quota"), (figures{Allocated: 2 * n, Count: n, Namespaces: []nsUsage{{"no-quota", 2 * n}}}); !cmp.Equal(got, want) {
				return fmt.Errorf("%+v, want %+v", got, want)
			}
			return nil
		})
	})
}

// TestObserverFoldsWhileRebuilding: after a restart the observer writes no
// bucket until every object is evaluated (here: held there by its writer's
// sync), but a create made meanwhile is folded on top of the bucket's last
// written figures at once, and a reservation whose object never came
// expires; a bucket does not gather reservations for as long as the rebuild
// lasts (issue 23). Once ready, its first write agrees.
func TestObserverFoldsWhileRebuilding(t *testing.T) {
	env, ctx := startControlPlane(t, "team-a", "team-b")
	k8s := env.Client
	cm1 := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "cm-1"}}
	if err := k8s.Create(ctx, cm1); err != nil {
		t.Fatal(err)
	}
	installPolicy(ctx, t, env)
	teamA := namespaceConsumer("team-a")
	one := figures{Allocated: 1, Count: 1, Namespaces: []nsUsage{{"team-a", 1}}}

	// The first observer counts cm-1, and stops.
	_, stop := startObserver(ctx, t, env, nil)
	eventuallyStatus(t, k8s, teamA, rtNamespace, one)
	stop()

	// The next one rebuilds, and stays there while rebuilding is held.
	var rebuilding atomic.Bool
	rebuilding.Store(true)
	w, _ := startObserver(ctx, t, env, func() bool { return !rebuilding.Load() })
	cm2 := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "cm-2"}}
	if err := k8s.Create(ctx, cm2); err != nil {
		t.Fatal(err)
	}
	reserve(ctx, t, admissionLedger(k8s, time.Hour), claimFor(cm2, teamA, rtNamespace))
	ghost := ledger.Claim{ID: "5e2d7b1f-ghost", Object: ledger.ObjectRef{Kind: "ConfigMap", Namespace: "team-a", Name: "ghost", UID: "5e2d7b1f-ghost"},
		Requests: []ledger.Request{{Consumer: teamA, ResourceType: rtNamespace, Amount: 1}}}
	reserve(ctx, t, admissionLedger(k8s, 2*time.Second), ghost)
	two := figures{Allocated: 2, Count: 2, Namespaces: []nsUsage{{"team-a", 2}}}
	eventuallyStatus(t, k8s, teamA, rtNamespace, two)
	eventuallyNoReservations(t, k8s, teamA, rtNamespace)
	if n := w.observed(); n != 0 {
		t.Fatalf("the observer wrote %d buckets' observations while it rebuilt; it folded, it must not have observed", n)
	}

	// Ready: its own first write counts both.
	rebuilding.Store(false)
	testenv.Eventually(t, wait, "the first observation of team-a", func() error {
		if diff := cmp.Diff(two, w.figures(ledger.NewBucketKey(teamA, rtNamespace, nil))); diff != "" {
			return fmt.Errorf("(-want +got):\n%s", diff)
		}
		return nil
	})
	eventuallyStatus(t, k8s, teamA, rtNamespace, two)
}

// startControlPlane starts a control plane for one test (skipped in -short
// mode) with the system namespace and the named tenant namespaces, each in
// organization acme, and returns it with a context the test's end cancels.
func startControlPlane(t *testing.T, namespaces ...string) (*testenv.Env, context.Context) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane; skipped in -short mode")
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(logLevel())))
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sysNS}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{orgLabel: "acme"}}}
		if err := env.Client.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	return env, ctx
}

// writeCount is the apiserver's count of ResourceClaim writes (create,
// update, patch, delete, status included): successful ones and all.
type writeCount struct{ ok, all int64 }

var requestTotal = regexp.MustCompile(`^apiserver_request_total\{(.*)\} (\d+)$`)

func claimWrites(ctx context.Context, t *testing.T, env *testenv.Env) writeCount {
	t.Helper()
	raw, err := kubernetes.NewForConfigOrDie(env.Config).RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var c writeCount
	for _, line := range strings.Split(string(raw), "\n") {
		m := requestTotal.FindStringSubmatch(line)
		if m == nil || !strings.Contains(m[1], `resource="resourceclaims"`) {
			continue
		}
		write := false
		for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			write = write || strings.Contains(m[1], `verb="`+verb+`"`)
		}
		if !write {
			continue
		}
		v, _ := strconv.ParseInt(m[2], 10, 64)
		c.all += v
		if strings.Contains(m[1], `code="20`) {
			c.ok += v
		}
	}
	return c
}

// eventuallyClaimWrites waits until there are views views and want more
// successful ResourceClaim writes than before, then checks that no more
// come, and returns the count.
func eventuallyClaimWrites(ctx context.Context, t *testing.T, env *testenv.Env, before writeCount, want int64, views int) writeCount {
	t.Helper()
	var got writeCount
	testenv.Eventually(t, wait, fmt.Sprintf("%d views, %d ResourceClaim writes", views, want), func() error {
		var list quotav1alpha1.ResourceClaimList
		if err := env.Client.List(ctx, &list, client.MatchingLabels{quotav1alpha1.ViewLabel: "true"}); err != nil {
			return err
		}
		got = claimWrites(ctx, t, env)
		if len(list.Items) != views || got.ok-before.ok < want {
			return fmt.Errorf("%d views, %d writes", len(list.Items), got.ok-before.ok)
		}
		return nil
	})
	time.Sleep(time.Second)
	if later := claimWrites(ctx, t, env); later.ok-before.ok != want {
		t.Fatalf("%d ResourceClaim writes, want %d", later.ok-before.ok, want)
	}
	return got
}

// viewSummary is what a test checks of a ResourceClaim view.
type viewSummary struct {
	Key         string // namespace/name
	Labels      map[string]string
	Owners      []metav1.OwnerReference
	Finalizers  []string
	Spec        quotav1alpha1.ResourceClaimSpec
	Granted     string // status/reason/message@observedGeneration
	Allocations []quotav1alpha1.RequestAllocation
}

// viewNames restates the observer's naming scheme: the object's name and a
// hash of its uid and the bucket it counts in.
var viewNames = names.Scheme{Tag: "quotakeeper.view/v1", Fallback: "claim", PrefixMax: 40, HashBytes: 8}

// wantView is the view of a ConfigMap counting 1 against consumer's
// bucket of resourceType.
func wantView(cm *corev1.ConfigMap, c ledger.Consumer, resourceType string) viewSummary {
	bucket := ledger.NewBucketKey(c, resourceType, nil).Name()
	return viewSummary{
		Key:    cm.Namespace + "/" + viewNames.Name(cm.Name, string(cm.UID), bucket),
		Labels: map[string]string{quotav1alpha1.ViewLabel: "true", quotav1alpha1.AutoCreatedLabel: "true"},
		Owners: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID, Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false)}},
		Spec: quotav1alpha1.ResourceClaimSpec{
			ConsumerRef: ledgerconv.ConsumerRef(c),
			Requests:    []quotav1alpha1.ResourceRequest{{ResourceType: resourceType, Amount: 1}},
			ResourceRef: &quotav1alpha1.ObjectRef{Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name, UID: string(cm.UID)},
		},
		Granted: "True/QuotaAvailable/All 1 resource requests have been granted@1",
		Allocations: []quotav1alpha1.RequestAllocation{{ResourceType: resourceType, Status: quotav1alpha1.AllocationGranted,
			Reason: "QuotaAvailable", AllocatedAmount: 1, AllocatingBucket: bucket}},
	}
}

// eventuallyViews waits until the ResourceClaim views are exactly want.
func eventuallyViews(t *testing.T, k8s client.Client, want map[string]viewSummary) {
	t.Helper()
	testenv.Eventually(t, wait, "ResourceClaim views", func() error {
		var list quotav1alpha1.ResourceClaimList
		if err := k8s.List(context.Background(), &list, client.MatchingLabels{quotav1alpha1.ViewLabel: "true"}); err != nil {
			return err
		}
		got := map[string]viewSummary{}
		for _, c := range list.Items {
			s := viewSummary{Key: c.Namespace + "/" + c.Name, Labels: c.Labels, Owners: c.OwnerReferences, Finalizers: c.Finalizers, Spec: c.Spec}
			if cond := meta.FindStatusCondition(c.Status.Conditions, quotav1alpha1.ConditionGranted); cond != nil {
				s.Granted = fmt.Sprintf("%s/%s/%s@%d", cond.Status, cond.Reason, cond.Message, cond.ObservedGeneration)
			}
			for _, a := range c.Status.Allocations {
				a.LastTransitionTime = metav1.Time{}
				s.Allocations = append(s.Allocations, a)
			}
			got[s.Key] = s
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("(-want +got):\n%s", diff)
		}
		return nil
	})
}

func logLevel() zapcore.Level {
	if os.Getenv("QUOTAKEEPER_TEST_LOG") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}

// installPolicy installs Gatekeeper's ConstraintTemplate CRD, the shipped
// quotaentity template, its constraint CRD (as Gatekeeper builds it) and
// three constraints on ConfigMaps in team-a and team-b: per namespace, per
// organization (a namespace label), and one with enforcementAction warn.
func installPolicy(ctx context.Context, t *testing.T, env *testenv.Env) {
	t.Helper()
	out, err := exec.Command("go", "list", "-mod=mod", "-m", "-f", "{{.Dir}}", "github.com/open-policy-agent/gatekeeper/v3").Output()
	if err != nil {
		t.Fatalf("gatekeeper module dir: %v", err)
	}
	gkCRD := filepath.Join(strings.TrimSpace(string(out)), "charts", "gatekeeper", "crds", "constrainttemplate-customresourcedefinition.yaml")
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{gkCRD}, ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
	// The constraint CRD, as Gatekeeper's template controller makes it.
	tmplObj, tmpl, err := testenv.InstallConstraintCRD(ctx, env.Config, "quotaentity")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, tmplObj); err != nil {
		t.Fatal(err)
	}
	constraint := func(name, action, resourceType string, consumers ...map[string]any) {
		spec := map[string]any{
			"match": map[string]any{
				"kinds":      []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"ConfigMap"}}},
				"namespaces": []any{"team-a", "team-b"},
			},
			"parameters": map[string]any{"resourceType": resourceType, "claimViews": true},
		}
		if action != "" {
			spec["enforcementAction"] = action
		}
		if len(consumers) > 0 {
			cs := make([]any, len(consumers))
			for i, c := range consumers {
				cs[i] = c
			}
			spec["parameters"].(map[string]any)["consumers"] = cs
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "constraints.gatekeeper.sh/v1beta1",
			"kind":       tmpl.Spec.CRD.Spec.Names.Kind,
			"metadata":   map[string]any{"name": name},
			"spec":       spec,
		}}
		if err := env.Client.Create(ctx, u); err != nil {
			t.Fatalf("constraint %s: %v", name, err)
		}
	}
	constraint("per-namespace", "", rtNamespace)
	constraint("per-organization", "deny", rtOrg, map[string]any{"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization"})
	constraint("warned", "warn", rtWarn)
}

// startObserver runs a manager holding only the observer, with the real
// ledger (grant mirror, kubestore) as cmd/quotakeeper-manager builds it,
// and returns its writer and a function that stops it. writerSynced, when
// not nil, holds the observer in its rebuild (not ready) while it returns
// false.
func startObserver(ctx context.Context, t *testing.T, env *testenv.Env, writerSynced func() bool) (*recordingWriter, func()) {
	t.Helper()
	return startObserverWith(ctx, t, env, observerSetup{writerSynced: writerSynced})
}

// observerSetup is what a test changes in what startObserverWith runs.
type observerSetup struct {
	// writerSynced: as startObserver's.
	writerSynced func() bool
	// manager, when set, changes the manager's options before it is made.
	manager func(*ctrl.Options)
	// observer, when set, changes the observer before it starts.
	observer func(*observer.Observer)
	// options, when set, changes the observer's options before it is made.
	options func(*observer.Options)
}

// startObserverWith is startObserver, with setup's changes.
func startObserverWith(ctx context.Context, t *testing.T, env *testenv.Env, setup observerSetup) (*recordingWriter, func()) {
	t.Helper()
	writerSynced := setup.writerSynced
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := quotav1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	opts := ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		// A test may run several observers, one after the other, in one
		// process: the same controller names again.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}}
	if setup.manager != nil {
		setup.manager(&opts)
	}
	mgr, err := ctrl.NewManager(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	l, m, err := grants.NewLedger(mgr, sysNS)
	if err != nil {
		t.Fatal(err)
	}
	w := &recordingWriter{Writer: l, last: map[ledger.BucketKey]ledger.Observation{}}
	// The suite expires reservations on purpose: it does not wait the
	// manager's minimum age for each.
	synced := m.HasSynced
	if writerSynced != nil {
		synced = func() bool { return m.HasSynced() && writerSynced() }
	}
	oopts := observer.Options{Writer: w, WriterSynced: synced, WriteInterval: 50 * time.Millisecond,
		Resync: resync, ObjectClaims: true, ObjectClaimsQPS: 200, MinReservationAge: time.Second}
	if setup.options != nil {
		setup.options(&oopts)
	}
	o, err := observer.New(mgr, oopts)
	if err != nil {
		t.Fatal(err)
	}
	if setup.observer != nil {
		setup.observer(o)
	}
	if err := mgr.Add(o); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	mctx, cancel := context.WithCancel(ctx)
	go func() { done <- mgr.Start(mctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return w, stop
}

// recordingWriter is the real ledger, remembering the last observation
// written to each bucket, so the test can tell what the observer computed
// from what the ledger stored.
type recordingWriter struct {
	observer.Writer
	mu   sync.Mutex
	last map[ledger.BucketKey]ledger.Observation
}

func (w *recordingWriter) Observe(ctx context.Context, key ledger.BucketKey, obs ledger.Observation) (ledger.Bucket, error) {
	b, err := w.Writer.Observe(ctx, key, obs)
	if err == nil {
		w.mu.Lock()
		w.last[key] = obs
		w.mu.Unlock()
	}
	return b, err
}

func (w *recordingWriter) observed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.last)
}

func (w *recordingWriter) figures(key ledger.BucketKey) figures {
	w.mu.Lock()
	defer w.mu.Unlock()
	obs := w.last[key]
	f := figures{Allocated: obs.Allocated, Count: obs.Count}
	for _, ns := range slices.Sorted(maps.Keys(obs.ByNamespace)) {
		f.Namespaces = append(f.Namespaces, nsUsage{ns, obs.ByNamespace[ns]})
	}
	return f
}

// admissionLedger stands in for Gatekeeper's: a kubestore ledger with
// enough quota for every bucket, reserving with the given TTL.
func admissionLedger(c client.Client, ttl time.Duration) *ledger.Ledger {
	set := ledger.NewGrantSet()
	for _, g := range []ledger.Grant{
		{ID: "a", Consumer: namespaceConsumer("team-a"), ResourceType: rtNamespace, Amount: 100},
		{ID: "b", Consumer: namespaceConsumer("team-b"), ResourceType: rtNamespace, Amount: 100},
		{ID: "w", Consumer: namespaceConsumer("team-a"), ResourceType: rtWarn, Amount: 100},
	} {
		if err := set.Set(g); err != nil {
			panic(err)
		}
	}
	return ledger.New(kubestore.New(c, kubestore.Options{SystemNamespace: sysNS}), set, ledger.WithReservationTTL(ttl))
}

func claimFor(cm *corev1.ConfigMap, c ledger.Consumer, resourceType string) ledger.Claim {
	uid := string(cm.UID)
	return ledger.Claim{ID: uid, Object: ledger.ObjectRef{Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name, UID: uid},
		Requests: []ledger.Request{{Consumer: c, ResourceType: resourceType, Amount: 1}}}
}

func reserve(ctx context.Context, t *testing.T, l *ledger.Ledger, claim ledger.Claim) {
	t.Helper()
	d, err := l.Reserve(ctx, claim)
	if err != nil || !d.Granted {
		t.Fatalf("reserve %s: %v %s", claim.ID, err, d.Message())
	}
}

type nsUsage struct {
	Namespace string
	Allocated int64
}

// figures are what the observer writes into a bucket's status.
type figures struct {
	Allocated  int64
	Count      int64
	Namespaces []nsUsage
}

// bucketStatus reads a bucket as unstructured, so the test reads the API
// as served, field names included.
func bucketStatus(k8s client.Client, c ledger.Consumer, resourceType string) (map[string]any, bool, error) {
	key := ledger.NewBucketKey(c, resourceType, nil)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(testenv.GVK("AllowanceBucket"))
	nn := types.NamespacedName{Namespace: quotav1alpha1.BucketNamespace(ledgerconv.ConsumerRef(c), sysNS), Name: key.Name()}
	if err := k8s.Get(context.Background(), nn, u); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, false, nil
		}
		return nil, false, err
	}
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	return status, true, nil
}

func eventuallyStatus(t *testing.T, k8s client.Client, c ledger.Consumer, resourceType string, want figures) {
	t.Helper()
	testenv.Eventually(t, wait, fmt.Sprintf("bucket %s/%s %s", c.Kind, c.Name, resourceType), func() error {
		status, ok, err := bucketStatus(k8s, c, resourceType)
		if err != nil {
			return err
		}
		got := figures{}
		if ok {
			got.Allocated, _, _ = unstructured.NestedInt64(status, "allocated")
			got.Count, _, _ = unstructured.NestedInt64(status, "claimCount")
			entries, _, _ := unstructured.NestedSlice(status, "namespaces")
			for _, e := range entries {
				em, _ := e.(map[string]any)
				ns, _, _ := unstructured.NestedString(em, "namespace")
				n, _, _ := unstructured.NestedInt64(em, "allocated")
				got.Namespaces = append(got.Namespaces, nsUsage{ns, n})
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("(-want +got):\n%s", diff)
		}
		return nil
	})
}

func eventuallyNoReservations(t *testing.T, k8s client.Client, c ledger.Consumer, resourceType string) {
	t.Helper()
	testenv.Eventually(t, wait, fmt.Sprintf("reservations of %s/%s %s gone", c.Kind, c.Name, resourceType), func() error {
		status, _, err := bucketStatus(k8s, c, resourceType)
		if err != nil {
			return err
		}
		if rs, _, _ := unstructured.NestedSlice(status, "reservations"); len(rs) > 0 {
			return fmt.Errorf("reservations: %v", rs)
		}
		return nil
	})
}
