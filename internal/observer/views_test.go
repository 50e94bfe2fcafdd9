package observer

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

var (
	nsTeamA  = ledger.Consumer{Kind: "Namespace", Name: "team-a"}
	orgAcme  = ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}
	webCM    = ViewedObject{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "web", UID: "3d0c-web"}
	webRef   = &quotav1alpha1.ObjectRef{Kind: "ConfigMap", Namespace: "team-a", Name: "web", UID: "3d0c-web"}
	webOwns  = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "web", UID: "3d0c-web", Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false)}}
	viewOnly = map[string]string{quotav1alpha1.ViewLabel: "true", quotav1alpha1.AutoCreatedLabel: "true"}
)

func recorded(md builtins.ClaimMetadata, reqs ...ledger.Request) builtins.RecordedClaim {
	md.View = true
	return builtins.RecordedClaim{Claim: ledger.Claim{ID: "3d0c-web", Requests: reqs}, Metadata: md}
}

func req(c ledger.Consumer, rt string, amount int64, dims map[string]string) ledger.Request {
	return ledger.Request{Consumer: c, ResourceType: rt, Amount: amount, Dimensions: dims}
}

func view(ns, name string, labels map[string]string, owners []metav1.OwnerReference, ref *quotav1alpha1.ObjectRef, c quotav1alpha1.ConsumerRef, reqs ...quotav1alpha1.ResourceRequest) *quotav1alpha1.ResourceClaim {
	return &quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, OwnerReferences: owners},
		Spec:       quotav1alpha1.ResourceClaimSpec{ConsumerRef: c, Requests: reqs, ResourceRef: ref},
	}
}

var (
	teamARef = quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-a"}
	acmeRef  = quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}
)

func TestViewsOneClaimPerConsumerNamedByTheMetadata(t *testing.T) {
	for _, tc := range []struct {
		name   string
		obj    ViewedObject
		claims []builtins.RecordedClaim
		want   []*quotav1alpha1.ResourceClaim
	}{{
		name: "metadata name, labels and annotations; owned by the object in its namespace",
		obj:  webCM,
		claims: []builtins.RecordedClaim{recorded(builtins.ClaimMetadata{Name: "web-configmaps",
			Labels: map[string]string{"app": "web", quotav1alpha1.ViewLabel: "no"}, Annotations: map[string]string{"example.com/note": "x"}},
			req(nsTeamA, "core/configmaps", 1, nil), req(nsTeamA, "core/configmaps", 2, nil))},
		want: []*quotav1alpha1.ResourceClaim{func() *quotav1alpha1.ResourceClaim {
			v := view("team-a", "web-configmaps", map[string]string{"app": "web", quotav1alpha1.ViewLabel: "true", quotav1alpha1.AutoCreatedLabel: "true"}, webOwns, webRef, teamARef,
				quotav1alpha1.ResourceRequest{ResourceType: "core/configmaps", Amount: 3})
			v.Annotations = map[string]string{"example.com/note": "x"}
			return v
		}()},
	}, {
		name:   "no metadata: a stable name from the object's",
		obj:    webCM,
		claims: []builtins.RecordedClaim{recorded(builtins.ClaimMetadata{}, req(nsTeamA, "core/configmaps", 1, nil))},
		want: []*quotav1alpha1.ResourceClaim{view("team-a", "web-760ad65c3531cb3d", viewOnly, webOwns, webRef, teamARef,
			quotav1alpha1.ResourceRequest{ResourceType: "core/configmaps", Amount: 1})},
	}, {
		name:   "generateName prefixes the stable name",
		obj:    webCM,
		claims: []builtins.RecordedClaim{recorded(builtins.ClaimMetadata{GenerateName: "quota-"}, req(nsTeamA, "core/configmaps", 1, nil))},
		want: []*quotav1alpha1.ResourceClaim{view("team-a", "quota-760ad65c3531cb3d", viewOnly, webOwns, webRef, teamARef,
			quotav1alpha1.ResourceRequest{ResourceType: "core/configmaps", Amount: 1})},
	}, {
		name: "a claim on two consumers makes two views, named from metadata.name",
		obj:  webCM,
		claims: []builtins.RecordedClaim{recorded(builtins.ClaimMetadata{Name: "web-configmaps"},
			req(nsTeamA, "core/configmaps", 1, nil), req(orgAcme, "core/configmaps", 1, nil))},
		want: []*quotav1alpha1.ResourceClaim{
			view("team-a", "web-configmaps-760ad65c3531cb3d", viewOnly, webOwns, webRef, teamARef, quotav1alpha1.ResourceRequest{ResourceType: "core/configmaps", Amount: 1}),
			view("team-a", "web-configmaps-2623cadc4e25f833", viewOnly, webOwns, webRef, acmeRef, quotav1alpha1.ResourceRequest{ResourceType: "core/configmaps", Amount: 1}),
		},
	}, {
		name: "one resource type in two sets of dimensions makes two views; two types make one",
		obj:  webCM,
		claims: []builtins.RecordedClaim{recorded(builtins.ClaimMetadata{},
			req(nsTeamA, "cpu", 500, map[string]string{"zone": "a"}), req(nsTeamA, "cpu", 250, map[string]string{"zone": "b"}),
			req(nsTeamA, "memory", 64, nil))},
		want: []*quotav1alpha1.ResourceClaim{
			view("team-a", "web-42e8c29e3f43da1a", viewOnly, webOwns, webRef, teamARef,
				quotav1alpha1.ResourceRequest{ResourceType: "cpu", Amount: 500, Dimensions: map[string]string{"zone": "a"}},
				quotav1alpha1.ResourceRequest{ResourceType: "memory", Amount: 64}),
			view("team-a", "web-a0bc7f17726f1372", viewOnly, webOwns, webRef, teamARef,
				quotav1alpha1.ResourceRequest{ResourceType: "cpu", Amount: 250, Dimensions: map[string]string{"zone": "b"}}),
		},
	}, {
		name: "two constraints counting one bucket make one view of the larger amount, as the tally counts",
		obj:  webCM,
		claims: []builtins.RecordedClaim{
			recorded(builtins.ClaimMetadata{}, req(nsTeamA, "core/configmaps", 3, nil)),
			recorded(builtins.ClaimMetadata{}, req(nsTeamA, "core/configmaps", 1, nil)),
		},
		want: []*quotav1alpha1.ResourceClaim{view("team-a", "web-760ad65c3531cb3d", viewOnly, webOwns, webRef, teamARef,
			quotav1alpha1.ResourceRequest{ResourceType: "core/configmaps", Amount: 3})},
	}, {
		name: "two claims asking for one name: the second gets a stable one",
		obj:  webCM,
		claims: []builtins.RecordedClaim{
			recorded(builtins.ClaimMetadata{Name: "web-quota"}, req(nsTeamA, "core/configmaps", 1, nil)),
			recorded(builtins.ClaimMetadata{Name: "web-quota"}, req(orgAcme, "core/configmaps", 1, nil)),
		},
		want: []*quotav1alpha1.ResourceClaim{
			view("team-a", "web-quota", viewOnly, webOwns, webRef, teamARef, quotav1alpha1.ResourceRequest{ResourceType: "core/configmaps", Amount: 1}),
			view("team-a", "web-quota-2623cadc4e25f833", viewOnly, webOwns, webRef, acmeRef, quotav1alpha1.ResourceRequest{ResourceType: "core/configmaps", Amount: 1}),
		},
	}, {
		name:   "a view in another namespace than its namespaced object has no owner (Kubernetes allows none)",
		obj:    webCM,
		claims: []builtins.RecordedClaim{recorded(builtins.ClaimMetadata{Name: "web", Namespace: "quotakeeper-system"}, req(orgAcme, "core/configmaps", 1, nil))},
		want: []*quotav1alpha1.ResourceClaim{view("quotakeeper-system", "web", viewOnly, nil, webRef, acmeRef,
			quotav1alpha1.ResourceRequest{ResourceType: "core/configmaps", Amount: 1})},
	}, {
		name:   "a cluster-scoped object's view lives in the system namespace, owned by it",
		obj:    ViewedObject{APIVersion: "example.com/v1", Kind: "Project", Name: "p1", UID: "9a1-p1", ClusterScoped: true},
		claims: []builtins.RecordedClaim{recorded(builtins.ClaimMetadata{}, req(orgAcme, "projects", 1, nil))},
		want: []*quotav1alpha1.ResourceClaim{view("quotakeeper-system", "p1-7647286de45c1e27", viewOnly,
			[]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Project", Name: "p1", UID: "9a1-p1", Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false)}},
			&quotav1alpha1.ObjectRef{APIGroup: "example.com", Kind: "Project", Name: "p1", UID: "9a1-p1"}, acmeRef,
			quotav1alpha1.ResourceRequest{ResourceType: "projects", Amount: 1})},
	}, {
		name:   "a Namespace's view lives in that namespace",
		obj:    ViewedObject{APIVersion: "v1", Kind: "Namespace", Name: "team-a", UID: "77-team-a", ClusterScoped: true},
		claims: []builtins.RecordedClaim{recorded(builtins.ClaimMetadata{}, req(orgAcme, "namespaces", 1, nil))},
		want: []*quotav1alpha1.ResourceClaim{view("team-a", "team-a-84170e2f28bc29b6", viewOnly,
			[]metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: "team-a", UID: "77-team-a", Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false)}},
			&quotav1alpha1.ObjectRef{Kind: "Namespace", Name: "team-a", UID: "77-team-a"}, acmeRef,
			quotav1alpha1.ResourceRequest{ResourceType: "namespaces", Amount: 1})},
	}, {
		name:   "nothing counted, no view",
		obj:    webCM,
		claims: []builtins.RecordedClaim{recorded(builtins.ClaimMetadata{Name: "web"}, req(nsTeamA, "core/configmaps", 0, nil))},
		want:   []*quotav1alpha1.ResourceClaim{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := Views(tc.obj, tc.claims, "quotakeeper-system")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			// The order quota.reserve was called in changes nothing.
			reversed := slices.Clone(tc.claims)
			slices.Reverse(reversed)
			if diff := cmp.Diff(got, Views(tc.obj, reversed, "quotakeeper-system")); diff != "" {
				t.Errorf("claims in reverse order (-first +reversed):\n%s", diff)
			}
		})
	}
}

func TestViewStatusIsGrantedQuotaAvailableFromEachBucket(t *testing.T) {
	v := view("team-a", "web-quota", viewOnly, webOwns, webRef, teamARef,
		quotav1alpha1.ResourceRequest{ResourceType: "cpu", Amount: 500, Dimensions: map[string]string{"zone": "a"}})
	v.Generation = 1
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	const msg = "All 1 resource requests have been granted" // Milo's words
	want := quotav1alpha1.ResourceClaimStatus{
		ObservedGeneration: 1,
		Allocations: []quotav1alpha1.RequestAllocation{{
			ResourceType: "cpu", Status: quotav1alpha1.AllocationGranted, Reason: "QuotaAvailable", AllocatedAmount: 500,
			AllocatingBucket: ledger.NewBucketKey(nsTeamA, "cpu", map[string]string{"zone": "a"}).Name(), LastTransitionTime: t0,
		}},
		Conditions: []metav1.Condition{{Type: "Granted", Status: metav1.ConditionTrue, Reason: "QuotaAvailable", Message: msg,
			ObservedGeneration: 1, LastTransitionTime: t0}},
	}
	first := ViewStatus(v, quotav1alpha1.ResourceClaimStatus{}, t0)
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Written again later, nothing transitioned: the times stay.
	if diff := cmp.Diff(want, ViewStatus(v, first, t1)); diff != "" {
		t.Errorf("again (-want +got):\n%s", diff)
	}
	if !quotav1alpha1.IsTrue(first.Conditions, quotav1alpha1.ConditionGranted, v.Generation) {
		t.Error("Granted is not True for the view's generation")
	}
}

// The view set answers which object's view a name shows (the first by
// ref), who else wants it, and which names a change touched: only those
// whose wanted view changed.
func TestViewSetWantersOfOneName(t *testing.T) {
	s := newViewSet()
	name := types.NamespacedName{Namespace: "team-a", Name: "web"}
	other := types.NamespacedName{Namespace: "team-a", Name: "db"}
	claim := func(n types.NamespacedName, amount int64) desiredView {
		return desiredView{claim: view(n.Namespace, n.Name, viewOnly, nil, webRef, teamARef,
			quotav1alpha1.ResourceRequest{ResourceType: "example.com/configmaps", Amount: amount})}
	}
	changes := func(ref string, views ...desiredView) []types.NamespacedName {
		t.Helper()
		got := s.set(ref, views)
		slices.SortFunc(got, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
		return got
	}
	wants := func(n types.NamespacedName, amount int64, others ...string) {
		t.Helper()
		v, gotOthers, ok := s.get(n)
		if !ok {
			t.Fatalf("%s: wanted by nobody, want amount %d", n, amount)
		}
		if got := v.claim.Spec.Requests[0].Amount; got != amount {
			t.Errorf("%s: amount %d, want %d", n, got, amount)
		}
		if diff := cmp.Diff(others, gotOthers); diff != "" {
			t.Errorf("%s: other wanters (-want +got):\n%s", n, diff)
		}
	}
	if diff := cmp.Diff([]types.NamespacedName{name}, changes("b", claim(name, 2))); diff != "" {
		t.Errorf("first want (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]types.NamespacedName{name}, changes("a", claim(name, 1))); diff != "" {
		t.Errorf("second object, same name (-want +got):\n%s", diff)
	}
	wants(name, 1, "b")
	if got := changes("a", claim(name, 1)); len(got) != 0 {
		t.Errorf("the same view again changed %v", got)
	}
	if diff := cmp.Diff([]types.NamespacedName{other, name}, changes("a", claim(other, 3))); diff != "" {
		t.Errorf("a moving to another name (-want +got):\n%s", diff)
	}
	wants(name, 2)
	wants(other, 3)
	if diff := cmp.Diff([]types.NamespacedName{name}, changes("b")); diff != "" {
		t.Errorf("b wanting nothing (-want +got):\n%s", diff)
	}
	if _, _, ok := s.get(name); ok {
		t.Errorf("%s still wanted after its last wanter left", name)
	}
	if diff := cmp.Diff([]types.NamespacedName{other}, s.names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}
