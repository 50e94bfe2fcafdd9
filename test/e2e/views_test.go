package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotakeeper/quotakeeper/api/names"
	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// Issue 10's cases on per-object ResourceClaims: the manager writes one per
// counted object as a view of what it counts; the object is counted, the
// view never is.

// viewNames restates the observer's naming of a view whose claim names
// none: the object's name, and a hash of its uid and the bucket it counts in.
var viewNames = names.Scheme{Tag: "quotakeeper.view/v1", Fallback: "claim", PrefixMax: 40, HashBytes: 8}

// configMapQuota registers resourceType (ConfigMaps counted against their
// namespace), grants ns amount of it and applies a QuotaEntity constraint
// on ns that writes ResourceClaim views. It returns the namespace's consumer.
func configMapQuota(t *testing.T, ns, resourceType string, amount int64) quotav1alpha1.ConsumerRef {
	t.Helper()
	namespace(t, ns, nil)
	registration(t, resourceType, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	grant(t, "configmaps", consumer, resourceType, amount)
	quotaEntity(t, ns, []string{ns}, map[string]any{"resourceType": resourceType, "claimViews": true})
	return consumer
}

// waitView waits until the view of ConfigMap ns/name, counting 1 of
// resourceType against consumer, is exactly as the observer writes it, and
// returns it.
func waitView(t *testing.T, ns, name string, consumer quotav1alpha1.ConsumerRef, resourceType string) *quotav1alpha1.ResourceClaim {
	t.Helper()
	return waitViewOf(t, ns, name, consumer, resourceType, viewMeta{})
}

// viewMeta is what a claim's metadata asks of its view (a
// ClaimCreationPolicy's rendering); empty: a generated name, only the view
// label.
type viewMeta struct {
	name        string
	labels      map[string]string
	annotations map[string]string
}

// waitViewOf is waitView for a view whose claim asked for md.
func waitViewOf(t *testing.T, ns, name string, consumer quotav1alpha1.ConsumerRef, resourceType string, md viewMeta) *quotav1alpha1.ResourceClaim {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
		t.Fatal(err)
	}
	bucket := ledger.NewBucketKey(ledgerconv.Consumer(consumer), resourceType, nil).Name()
	key := client.ObjectKey{Namespace: ns, Name: viewNames.Name(name, string(cm.UID), bucket)}
	if md.name != "" {
		key.Name = md.name
	}
	// Milo's marks of a claim written for an object, and ours of a view.
	labels := map[string]string{quotav1alpha1.ViewLabel: "true", quotav1alpha1.AutoCreatedLabel: "true"}
	maps.Copy(labels, md.labels)
	want := builders.Claim(key.Name, key.Namespace).Generation(1).Labels(labels).Annotations(md.annotations).
		OwnedBy(metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: cm.UID,
			Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false)}).
		Consumer(consumer).Request(resourceType, 1, nil).
		For(quotav1alpha1.ObjectRef{Kind: "ConfigMap", Namespace: ns, Name: name, UID: string(cm.UID)}).
		Status(quotav1alpha1.ResourceClaimStatus{
			ObservedGeneration: 1,
			Allocations: []quotav1alpha1.RequestAllocation{{ResourceType: resourceType, Status: quotav1alpha1.AllocationGranted,
				Reason: quotav1alpha1.ReasonQuotaAvailable, AllocatedAmount: 1, AllocatingBucket: bucket}},
			Conditions: []metav1.Condition{{Type: quotav1alpha1.ConditionGranted, Status: metav1.ConditionTrue,
				Reason: quotav1alpha1.ReasonQuotaAvailable, ObservedGeneration: 1,
				Message: "All 1 resource requests have been granted"}},
		}).Obj()
	got := &quotav1alpha1.ResourceClaim{}
	testenv.Eventually(t, time.Minute, "view of ConfigMap "+ns+"/"+name, func() error {
		if err := cluster.Client.Get(context.Background(), key, got); err != nil {
			return err
		}
		seen := quotav1alpha1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: got.Namespace, Name: got.Name, Generation: got.Generation,
				Labels: got.Labels, Annotations: got.Annotations, OwnerReferences: got.OwnerReferences, Finalizers: got.Finalizers},
			Spec:   got.Spec,
			Status: *got.Status.DeepCopy(),
		}
		for i := range seen.Status.Allocations {
			seen.Status.Allocations[i].LastTransitionTime = metav1.Time{}
		}
		for i := range seen.Status.Conditions {
			seen.Status.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		if diff := cmp.Diff(*want, seen); diff != "" {
			return fmt.Errorf("(-want +got):\n%s", diff)
		}
		return nil
	})
	return got
}

// views lists the view claims in ns by the name of the object they show.
func views(t *testing.T, ns string) map[string]*quotav1alpha1.ResourceClaim {
	t.Helper()
	var list quotav1alpha1.ResourceClaimList
	if err := cluster.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{quotav1alpha1.ViewLabel: "true"}); err != nil {
		t.Fatal(err)
	}
	out := map[string]*quotav1alpha1.ResourceClaim{}
	for i := range list.Items {
		out[list.Items[i].Spec.ResourceRef.Name] = &list.Items[i]
	}
	return out
}

// Deleting an object's ResourceClaim frees nothing: the object is counted,
// not its claim. The manager writes the claim again, and the quota left is
// exactly what the live objects leave.
func TestDeletingAnObjectsClaimFreesNothing(t *testing.T) {
	t.Parallel()
	const ns, rt = "e2e-view-delete", "e2e.quota/view-delete-configmaps"
	consumer := configMapQuota(t, ns, rt, 3)
	mustAdmit(t, ns, "cm-1")
	mustAdmit(t, ns, "cm-2")
	waitBucket(t, consumer, rt, 2, 0)
	v := waitView(t, ns, "cm-1", consumer, rt)
	waitView(t, ns, "cm-2", consumer, rt)

	if err := cluster.Client.Delete(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the deleted view written again", func() error {
		again := &quotav1alpha1.ResourceClaim{}
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(v), again); err != nil {
			return err
		}
		if again.UID == v.UID {
			return fmt.Errorf("view %s not deleted yet", v.Name)
		}
		return nil
	})
	waitView(t, ns, "cm-1", consumer, rt)
	if st := bucket(t, consumer, rt); st.Allocated != 2 || st.Reserved != 0 || st.Available != 1 || st.ClaimCount != 2 {
		t.Fatalf("after deleting a view: allocated %d reserved %d available %d claimCount %d, want 2, 0, 1, 2",
			st.Allocated, st.Reserved, st.Available, st.ClaimCount)
	}
	mustAdmit(t, ns, "cm-3")
	mustDeny(t, ns, "cm-4", "requested 1 of "+rt, "available 0 of 3")
	waitBucket(t, consumer, rt, 3, 0)
	if got := len(views(t, ns)); got != 3 {
		t.Fatalf("%d views, want 3 (one per ConfigMap)", got)
	}
}

// An orphaning delete (propagationPolicy Orphan: the garbage collector
// strips the owner reference from the object's dependents and leaves them)
// returns the object's quota, and the manager removes its view.
func TestAnOrphaningDeleteLeaksNothing(t *testing.T) {
	t.Parallel()
	const ns, rt = "e2e-view-orphan", "e2e.quota/view-orphan-configmaps"
	consumer := configMapQuota(t, ns, rt, 3)
	mustAdmit(t, ns, "cm-1")
	mustAdmit(t, ns, "cm-2")
	waitBucket(t, consumer, rt, 2, 0)
	orphaned := waitView(t, ns, "cm-1", consumer, rt)
	kept := waitView(t, ns, "cm-2", consumer, rt)

	if err := cluster.Client.Delete(context.Background(), configMap(ns, "cm-1", nil), client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	waitBucket(t, consumer, rt, 1, 0)
	testenv.Eventually(t, time.Minute, "the orphaned view removed", func() error {
		err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(orphaned), &quotav1alpha1.ResourceClaim{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("view %s still there (%w)", orphaned.Name, err)
		}
		return nil
	})
	if got := views(t, ns); len(got) != 1 || got["cm-2"] == nil || got["cm-2"].UID != kept.UID {
		t.Fatalf("views after the orphaning delete: %v, want only cm-2's %s", keysOf(got), kept.Name)
	}
	if st := bucket(t, consumer, rt); st.Allocated != 1 || st.Reserved != 0 || st.Available != 2 || st.ClaimCount != 1 {
		t.Fatalf("after the orphaning delete: allocated %d reserved %d available %d claimCount %d, want 1, 0, 2, 1",
			st.Allocated, st.Reserved, st.Available, st.ClaimCount)
	}
	mustAdmit(t, ns, "cm-3")
	mustAdmit(t, ns, "cm-4")
	mustDeny(t, ns, "cm-5", "requested 1 of "+rt, "available 0 of 3")
	waitBucket(t, consumer, rt, 3, 0)
}

// waitViewAmount waits until object ns/name has exactly one view, Granted
// with reason Observed, requesting amount, and returns it.
func waitViewAmount(t *testing.T, ns, name string, amount int64) *quotav1alpha1.ResourceClaim {
	t.Helper()
	var v *quotav1alpha1.ResourceClaim
	testenv.Eventually(t, time.Minute, fmt.Sprintf("the view of %s/%s at %d", ns, name, amount), func() error {
		v = views(t, ns)[name]
		if v == nil {
			return fmt.Errorf("no view of %s", name)
		}
		c := meta.FindStatusCondition(v.Status.Conditions, quotav1alpha1.ConditionGranted)
		if len(v.Spec.Requests) != 1 || v.Spec.Requests[0].Amount != amount || c == nil ||
			c.Status != metav1.ConditionTrue || c.Reason != quotav1alpha1.ReasonQuotaAvailable || c.ObservedGeneration != v.Generation {
			return fmt.Errorf("view %s: requests %+v, Granted %+v", v.Name, v.Spec.Requests, c)
		}
		return nil
	})
	return v
}

// requireOnlyViews asserts that ns holds n ResourceClaims, all views.
func requireOnlyViews(t *testing.T, ns string, n int) {
	t.Helper()
	var claims quotav1alpha1.ResourceClaimList
	if err := cluster.Client.List(context.Background(), &claims, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	views := 0
	for _, c := range claims.Items {
		if quotav1alpha1.IsView(c.Labels) {
			views++
		}
	}
	if len(claims.Items) != n || views != n {
		t.Fatalf("%d ResourceClaims, %d of them views; want %d views and nothing else", len(claims.Items), views, n)
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
