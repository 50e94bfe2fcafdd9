package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/controllers"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// effectiveGrants lists the effective grants of a consumer and resource
// type, by namespace.
func effectiveGrants(c ledger.Consumer, rt string) (map[string]quotav1alpha1.EffectiveResourceGrant, error) {
	var list quotav1alpha1.EffectiveResourceGrantList
	if err := k8s.List(ctx, &list); err != nil {
		return nil, err
	}
	out := map[string]quotav1alpha1.EffectiveResourceGrant{}
	for _, e := range list.Items {
		if e.Spec.ConsumerRef == ledgerconv.ConsumerRef(c) && e.Spec.ResourceType == rt {
			out[e.Namespace] = e
		}
	}
	return out, nil
}

func wantEffective(t *testing.T, c ledger.Consumer, rt string, namespaces []string, want quotav1alpha1.EffectiveResourceGrantStatus) {
	t.Helper()
	testenv.Eventually(t, settle, "EffectiveResourceGrant of "+rt, func() error {
		got, err := effectiveGrants(c, rt)
		if err != nil {
			return err
		}
		if len(got) != len(namespaces) {
			return fmt.Errorf("effective grants in %d namespaces, want %v", len(got), namespaces)
		}
		for _, ns := range namespaces {
			e, ok := got[ns]
			if !ok {
				return fmt.Errorf("no effective grant in %s", ns)
			}
			if diff := cmp.Diff(want, e.Status); diff != "" {
				return fmt.Errorf("effective grant in %s (-want +got):\n%s", ns, diff)
			}
		}
		return nil
	})
}

// An organization's tenants read its quota in each of their namespaces,
// whatever namespace its buckets live in; namespaces gain and lose the view
// with the organization's label.
func TestEffectiveGrantsFollowTheConsumersNamespaces(t *testing.T) {
	needEnv(t)
	const rt = "t15.example.com/cpu"
	acme := orgConsumer("acme-t15")
	newRegistration(t, "t15-cpu", rt, organizationType, "region")
	newNamespace(t, "t15-a", tenantOf("acme-t15"))
	newNamespace(t, "t15-b", nil)
	newGrant(t, "t15", acme, quotav1alpha1.Allowance{ResourceType: rt, Buckets: []quotav1alpha1.GrantBucket{
		{Amount: 1000, DimensionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "dfw"}}},
		{Amount: 500, DimensionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "lhr"}}},
	}})
	waitDecided(t, newClaim(t, "t15-a", "c", acme, builders.Request(rt, 200, map[string]string{"region": "lhr"})))
	observeClaims(t, acme)
	dfw, lhr := bucketKey(acme, rt, map[string]string{"region": "dfw"}), bucketKey(acme, rt, map[string]string{"region": "lhr"})
	wantBucket(t, dfw, usage{1000, 0, 0, 1000})
	wantBucket(t, lhr, usage{500, 200, 0, 300})
	refs := []quotav1alpha1.BucketRef{
		{Name: dfw.Name(), Namespace: sysNS, Dimensions: map[string]string{"region": "dfw"}, Limit: 1000, Available: 1000},
		{Name: lhr.Name(), Namespace: sysNS, Dimensions: map[string]string{"region": "lhr"}, Limit: 500, Allocated: 200, Available: 300},
	}
	if refs[0].Name > refs[1].Name {
		refs[0], refs[1] = refs[1], refs[0]
	}
	want := quotav1alpha1.EffectiveResourceGrantStatus{
		TotalLimit: 1500, TotalAllocated: 200, Available: 1300, AllowanceBucketRefs: refs,
		Units:   &quotav1alpha1.Units{BaseUnit: "unit", UnitConversionFactor: 1},
		Display: &quotav1alpha1.DisplayTotals{Limit: "1500 unit", Allocated: "200 unit", Reserved: "0 unit", Available: "1300 unit"},
	}
	wantEffective(t, acme, rt, []string{"t15-a"}, want)

	// The registration's units reach the tenant's view, converted exactly.
	reg := &quotav1alpha1.ResourceRegistration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "t15-cpu"}, reg); err != nil {
		t.Fatal(err)
	}
	reg.Spec.BaseUnit, reg.Spec.DisplayUnit, reg.Spec.UnitConversionFactor = "millicores", "cores", 1000
	if err := k8s.Update(ctx, reg); err != nil {
		t.Fatal(err)
	}
	want.Units = &quotav1alpha1.Units{BaseUnit: "millicores", DisplayUnit: "cores", UnitConversionFactor: 1000}
	want.Display = &quotav1alpha1.DisplayTotals{Limit: "1.5 cores", Allocated: "0.2 cores", Reserved: "0 cores", Available: "1.3 cores"}
	wantEffective(t, acme, rt, []string{"t15-a"}, want)

	label := func(ns string, labels map[string]string) {
		t.Helper()
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(nsGVK)
		if err := k8s.Get(ctx, client.ObjectKey{Name: ns}, obj); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(obj.DeepCopy())
		obj.SetLabels(labels)
		if err := k8s.Patch(ctx, obj, patch); err != nil {
			t.Fatal(err)
		}
	}
	label("t15-b", tenantOf("acme-t15"))
	wantEffective(t, acme, rt, []string{"t15-a", "t15-b"}, want)
	label("t15-a", map[string]string{})
	wantEffective(t, acme, rt, []string{"t15-b"}, want)
}

var nsGVK = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}

// Done when: the controller's own writes do not refresh it again. While a
// bucket's usage changes as fast as it can be written for 8 s, an
// Organization's effective grants are rewritten once per refresh (5 s): at
// most twice. When the controller watched its own status writes, each
// refresh queued the next at once, and they were rewritten over and over.
func TestEffectiveGrantsDoNotRefreshThemselves(t *testing.T) {
	needEnv(t)
	const rt = "tloop.example.com/cpu"
	acme := orgConsumer("acme-tloop")
	newRegistration(t, "tloop-cpu", rt, organizationType)
	var namespaces []string
	for i := range 10 {
		namespaces = append(namespaces, fmt.Sprint("tloop-", i))
		newNamespace(t, namespaces[i], tenantOf("acme-tloop"))
	}
	newGrant(t, "tloop", acme, quotav1alpha1.Allowance{ResourceType: rt, Buckets: []quotav1alpha1.GrantBucket{{Amount: 1000}}})
	key := bucketKey(acme, rt, nil)
	wantBucket(t, key, usage{1000, 0, 0, 1000})
	name := client.ObjectKey{Namespace: namespaces[0], Name: quotav1alpha1.EffectiveResourceGrantName(ledgerconv.ConsumerRef(acme), rt)}
	var erg quotav1alpha1.EffectiveResourceGrant
	testenv.Eventually(t, settle, "the effective grants show the limit", func() error {
		got, err := effectiveGrants(acme, rt)
		if err != nil {
			return err
		}
		for _, ns := range namespaces {
			if got[ns].Status.TotalLimit != 1000 {
				return fmt.Errorf("effective grant in %s: totalLimit %d, want 1000", ns, got[ns].Status.TotalLimit)
			}
		}
		return k8s.Get(ctx, name, &erg)
	})

	// One refresh for usage first: by then every event of the setup (the
	// effective grants' creation, the namespaces' labels) has been handled,
	// and what follows is the refreshes' own doing.
	observe := func(allocated int64) error {
		_, err := obs.ledger.Observe(ctx, key, ledger.Observation{Allocated: allocated, Count: allocated, ByNamespace: map[string]int64{namespaces[0]: allocated}})
		return err
	}
	if err := observe(1); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, settle, "the effective grant shows the first usage", func() error {
		if err := k8s.Get(ctx, name, &erg); err != nil {
			return err
		}
		if erg.Status.TotalAllocated != 1 {
			return fmt.Errorf("totalAllocated %d, want 1", erg.Status.TotalAllocated)
		}
		return nil
	})

	versions := map[string]bool{erg.ResourceVersion: true}
	churned := make(chan error, 1)
	go func() {
		for i, end := int64(2), time.Now().Add(8*time.Second); time.Now().Before(end); i++ {
			if err := observe(i); err != nil {
				churned <- err
				return
			}
		}
		churned <- nil
	}()
	for {
		select {
		case err := <-churned:
			if err != nil {
				t.Fatal(err)
			}
			if writes := len(versions) - 1; writes > 2 {
				t.Errorf("the effective grant was rewritten %d times while usage changed for 8s; want at most 2 (one per 5s refresh)", writes)
			}
			return
		case <-time.After(10 * time.Millisecond):
			if err := k8s.Get(ctx, name, &erg); err != nil {
				t.Fatal(err)
			}
			versions[erg.ResourceVersion] = true
		}
	}
}

// An effective grant whose status write conflicts (the cache held an older
// version: the controller's own last write, not yet seen) is refreshed again
// after the refresh interval. Its status changes are not watched, so nothing else would bring
// it back: it kept a limit of 0 for minutes in a load run.
func TestEffectiveGrantWriteConflictRefreshesAgain(t *testing.T) {
	needEnv(t)
	const rt = "tconflict.example.com/cpu"
	acme := orgConsumer("acme-tconflict")
	newRegistration(t, "tconflict-cpu", rt, organizationType)
	newNamespace(t, "tconflict", tenantOf("acme-tconflict"))
	newGrant(t, "tconflict", acme, quotav1alpha1.Allowance{ResourceType: rt, Buckets: []quotav1alpha1.GrantBucket{{Amount: 1000}}})
	name := client.ObjectKey{Namespace: "tconflict", Name: quotav1alpha1.EffectiveResourceGrantName(ledgerconv.ConsumerRef(acme), rt)}
	var erg quotav1alpha1.EffectiveResourceGrant
	testenv.Eventually(t, settle, "the effective grant shows the limit", func() error {
		if err := k8s.Get(ctx, name, &erg); err != nil {
			return err
		}
		if erg.Status.TotalLimit != 1000 {
			return fmt.Errorf("totalLimit %d", erg.Status.TotalLimit)
		}
		return nil
	})
	// A wrong status the manager does not see (it does not watch status).
	erg.Status.TotalLimit = 7
	if err := k8s.Status().Update(ctx, &erg); err != nil {
		t.Fatal(err)
	}

	testenv.Eventually(t, settle, "the manager's cache holds the wrong status", func() error {
		var cached quotav1alpha1.EffectiveResourceGrant
		if err := mgr.Client.Get(ctx, name, &cached); err != nil {
			return err
		}
		if cached.Status.TotalLimit != 7 {
			return fmt.Errorf("totalLimit %d", cached.Status.TotalLimit)
		}
		return nil
	})
	// The manager's own cached client, whose first effective grant status
	// write conflicts.
	c := conflictOnce{Client: mgr.Client, left: new(int)}
	*c.left = 1
	totalLimit := func() int64 {
		t.Helper()
		if err := k8s.Get(ctx, name, &erg); err != nil {
			t.Fatal(err)
		}
		return erg.Status.TotalLimit
	}
	res, err := controllers.ReconcileEffective(ctx, c, acme, rt)
	if err != nil || res.RequeueAfter != controllers.DefaultEffectiveRefresh {
		t.Fatalf("after a conflict: result %+v, error %v; want asked again after the refresh (%s)", res, err, controllers.DefaultEffectiveRefresh)
	}
	if got := totalLimit(); got != 7 {
		t.Fatalf("the conflicted write landed: totalLimit %d", got)
	}
	res, err = controllers.ReconcileEffective(ctx, c, acme, rt)
	if err != nil || res.RequeueAfter != 0 {
		t.Fatalf("again: result %+v, error %v", res, err)
	}
	if got := totalLimit(); got != 1000 {
		t.Fatalf("after the refresh asked for: totalLimit %d, want 1000", got)
	}
}

// conflictOnce is a client whose next *left effective grant status writes
// fail with a conflict, as a write from a stale cache does.
type conflictOnce struct {
	client.Client
	left *int
}

func (c conflictOnce) Status() client.SubResourceWriter {
	return conflictWriter{c.Client.Status(), c.left}
}

type conflictWriter struct {
	client.SubResourceWriter
	left *int
}

func (w conflictWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if _, ok := obj.(*quotav1alpha1.EffectiveResourceGrant); ok && *w.left > 0 {
		*w.left--
		return apierrors.NewConflict(schema.GroupResource{Group: quotav1alpha1.GroupVersion.Group, Resource: "effectiveresourcegrants"}, obj.GetName(), errors.New("the object has been modified"))
	}
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}
