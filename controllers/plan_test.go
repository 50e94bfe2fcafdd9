package controllers

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotakeeper/quotakeeper/api/ledgerconv"
	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/ledger"
)

// These tests cover the pure parts of the controllers: what they decide
// from what they read. The envtest suite covers the rest against a real
// apiserver.

var acme = ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}

const rtProjects = "resourcemanager.miloapis.com/projects"

func planClaim(uid string, amount int64, state string, mods ...func(*quotav1alpha1.ResourceClaim)) quotav1alpha1.ResourceClaim {
	c := quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "team", UID: types.UID(uid), Generation: 1},
		Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: ledgerconv.ConsumerRef(acme),
			Requests: []quotav1alpha1.ResourceRequest{{ResourceType: rtProjects, Amount: amount}}},
	}
	switch state {
	case "granted":
		c.Status.Conditions = []metav1.Condition{{Type: "Granted", Status: metav1.ConditionTrue, ObservedGeneration: 1}}
	case "denied":
		c.Status.Conditions = []metav1.Condition{{Type: "Granted", Status: metav1.ConditionFalse, ObservedGeneration: 1}}
	case "pending":
		c.Status.Conditions = []metav1.Condition{{Type: "Granted", Status: "Unknown", ObservedGeneration: 1}}
	}
	for _, m := range mods {
		m(&c)
	}
	return c
}

// rendered is a bucket status as the store writes it.
func rendered(limit int64, allocs ...quotav1alpha1.Allocation) *quotav1alpha1.AllowanceBucket {
	var sum int64
	for _, a := range allocs {
		sum += a.Amount
	}
	over := metav1.ConditionFalse
	if sum > limit {
		over = metav1.ConditionTrue
	}
	return &quotav1alpha1.AllowanceBucket{Status: quotav1alpha1.AllowanceBucketStatus{
		Limit: limit, Allocated: sum, Available: max(limit-sum, 0), ClaimCount: int32(len(allocs)), Allocations: allocs,
		Conditions: []metav1.Condition{{Type: quotav1alpha1.ConditionOverLimit, Status: over}},
	}}
}

func TestPlanRepairFollowsTheClaims(t *testing.T) {
	key := ledger.NewBucketKey(acme, rtProjects, nil)
	obj := rendered(10,
		quotav1alpha1.Allocation{ID: "denied", Amount: 1},
		quotav1alpha1.Allocation{ID: "granted-ok", Amount: 2},
		quotav1alpha1.Allocation{ID: "granted-wrong", Amount: 5},
		quotav1alpha1.Allocation{ID: "in-flight", Amount: 1},
		quotav1alpha1.Allocation{ID: "orphan", Amount: 1},
	)
	deleting := metav1.NewTime(time.Unix(1, 0))
	claims := []quotav1alpha1.ResourceClaim{
		planClaim("granted-ok", 2, "granted"),
		planClaim("granted-wrong", 3, "granted"),
		planClaim("granted-missing", 4, "granted"),
		planClaim("denied", 1, "denied"),
		planClaim("in-flight", 1, ""),
		planClaim("pending", 1, "pending"),
		planClaim("deleting", 1, "granted", func(c *quotav1alpha1.ResourceClaim) { c.DeletionTimestamp = &deleting }),
		planClaim("realized-uid", 1, "granted", func(c *quotav1alpha1.ResourceClaim) {
			c.Annotations = map[string]string{quotav1alpha1.ReservationIDAnnotation: "object-uid"}
		}),
		// Granted, but for another bucket: says nothing about this one.
		planClaim("elsewhere", 1, "granted", func(c *quotav1alpha1.ResourceClaim) { c.Spec.Requests[0].ResourceType = "other" }),
	}
	fix, drifted := planRepair(key, obj, claims)
	if !drifted {
		t.Fatal("no drift found")
	}
	want := ledger.Fix{
		Allocations: map[string]int64{"granted-wrong": 3, "granted-missing": 4, "object-uid": 1},
		Remove:      []string{"denied", "orphan"},
	}
	if diff := cmp.Diff(want, fix); diff != "" {
		t.Fatalf("fix (-want +got):\n%s", diff)
	}
}

func TestPlanRepairAgreeingBucketIsLeftAlone(t *testing.T) {
	key := ledger.NewBucketKey(acme, rtProjects, nil)
	obj := rendered(3, quotav1alpha1.Allocation{ID: "a", Amount: 2}, quotav1alpha1.Allocation{ID: "b", Amount: 2})
	claims := []quotav1alpha1.ResourceClaim{planClaim("a", 2, "granted"), planClaim("b", 2, "granted")}
	if fix, drifted := planRepair(key, obj, claims); drifted {
		t.Fatalf("agreeing bucket (over its lowered limit) planned a fix: %+v", fix)
	}
	// A missing bucket with granted claims is re-created from them.
	fix, drifted := planRepair(key, nil, claims)
	if diff := cmp.Diff(map[string]int64{"a": 2, "b": 2}, fix.Allocations); !drifted || diff != "" || fix.Rewrite {
		t.Fatalf("missing bucket: drifted=%v rewrite=%v, allocations (-want +got):\n%s", drifted, fix.Rewrite, diff)
	}
}

func TestStatusDrifted(t *testing.T) {
	edits := map[string]func(*quotav1alpha1.AllowanceBucketStatus){
		"allocated":  func(s *quotav1alpha1.AllowanceBucketStatus) { s.Allocated = 99 },
		"reserved":   func(s *quotav1alpha1.AllowanceBucketStatus) { s.Reserved = 1 },
		"available":  func(s *quotav1alpha1.AllowanceBucketStatus) { s.Available = 0 },
		"claimCount": func(s *quotav1alpha1.AllowanceBucketStatus) { s.ClaimCount = 7 },
		"grantCount": func(s *quotav1alpha1.AllowanceBucketStatus) { s.GrantCount = 7 },
		"overLimit":  func(s *quotav1alpha1.AllowanceBucketStatus) { s.Conditions[0].Status = metav1.ConditionTrue },
		"unsorted": func(s *quotav1alpha1.AllowanceBucketStatus) {
			s.Allocations[0], s.Allocations[1] = s.Allocations[1], s.Allocations[0]
		},
		"duplicate id": func(s *quotav1alpha1.AllowanceBucketStatus) { s.Allocations[1].ID = "a" },
	}
	if statusDrifted(rendered(10, quotav1alpha1.Allocation{ID: "a", Amount: 1}, quotav1alpha1.Allocation{ID: "b", Amount: 2})) {
		t.Fatal("a rendered status reads as drifted")
	}
	for name, edit := range edits {
		obj := rendered(10, quotav1alpha1.Allocation{ID: "a", Amount: 1}, quotav1alpha1.Allocation{ID: "b", Amount: 2})
		edit(&obj.Status)
		if !statusDrifted(obj) {
			t.Errorf("edit of %s not seen as drift", name)
		}
	}
}

func TestPrecreatedKeys(t *testing.T) {
	sel := func(s string) labels.Selector {
		out, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	g := func(id string, s labels.Selector) ledger.Grant {
		return ledger.Grant{ID: id, Consumer: acme, ResourceType: "cpu", Amount: 1, Selector: s}
	}
	keys := precreatedKeys([]ledger.Grant{
		g("none", nil), g("none-again", nil),
		g("eq", sel("region=dfw,tier=gold")), g("in-one", sel("region in (lhr)")),
		g("in-two", sel("region in (lhr,dfw)")), g("notin", sel("region notin (dfw)")), g("exists", sel("region")),
	})
	var got []string
	for _, k := range keys {
		got = append(got, k.Dimensions)
	}
	if diff := cmp.Diff([]string{"", "region=dfw,tier=gold", "region=lhr"}, got); diff != "" {
		t.Fatalf("pre-created dimension sets (-want +got):\n%s", diff)
	}
}

func TestGroupForClaimsOnePerConsumerAndDimensions(t *testing.T) {
	ns := ledger.Consumer{Kind: "Namespace", Name: "team"}
	res := func(id string) quotav1alpha1.Reservation {
		return quotav1alpha1.Reservation{ID: id, Amount: 1, Object: quotav1alpha1.ObjectRef{Kind: "ConfigMap", Namespace: "team", Name: "cm", UID: "u1"}}
	}
	held := []heldReservation{
		{ledger.NewBucketKey(acme, "cpu", map[string]string{"region": "dfw"}), res("u1")},
		{ledger.NewBucketKey(ns, "configmaps", nil), res("u1")},
		{ledger.NewBucketKey(acme, "memory", map[string]string{"region": "dfw"}), res("u1")},
		{ledger.NewBucketKey(acme, "projects", nil), res("u1")},
	}
	groups := groupForClaims(held)
	if len(groups) != 3 {
		t.Fatalf("%d claims, want 3 (namespace; organization in dfw; organization without dimensions)", len(groups))
	}
	obj := held[0].reservation.Object
	names := map[string]bool{}
	for _, g := range groups {
		name := g.name(obj)
		if !strings.HasPrefix(name, "configmap-cm-") || len(name) != len("configmap-cm-")+16 {
			t.Errorf("claim name %q", name)
		}
		names[name] = true
		spec := g.spec(obj)
		if g.consumer == acme && g.dims == "region=dfw" {
			if len(spec.Requests) != 2 || spec.Requests[0].ResourceType != "cpu" || spec.Requests[1].ResourceType != "memory" ||
				spec.Requests[0].Dimensions["region"] != "dfw" {
				t.Errorf("dfw claim requests %+v", spec.Requests)
			}
		}
	}
	if len(names) != 3 {
		t.Fatalf("claim names collide: %v", names)
	}
	// Deterministic: a restarted manager finds the claims it made.
	again := groupForClaims([]heldReservation{held[3], held[2], held[1], held[0]})
	for i := range groups {
		if groups[i].name(obj) != again[i].name(obj) {
			t.Fatalf("names depend on order: %s vs %s", groups[i].name(obj), again[i].name(obj))
		}
	}
}

func TestActiveRegistrationKeepsTheActiveOne(t *testing.T) {
	at := func(sec int64) metav1.Time { return metav1.NewTime(time.Unix(sec, 0)) }
	r := func(name string, created int64, active bool) quotav1alpha1.ResourceRegistration {
		out := quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(created)},
			Spec: quotav1alpha1.ResourceRegistrationSpec{ResourceType: rtProjects}}
		if active {
			out.Status.Conditions = []metav1.Condition{{Type: "Active", Status: metav1.ConditionTrue}}
		}
		return out
	}
	cases := []struct {
		regs []quotav1alpha1.ResourceRegistration
		want string
	}{
		{[]quotav1alpha1.ResourceRegistration{r("b", 1, false), r("a", 2, false)}, "b"},                 // oldest
		{[]quotav1alpha1.ResourceRegistration{r("b", 1, false), r("a", 1, false)}, "a"},                 // then name
		{[]quotav1alpha1.ResourceRegistration{r("old", 1, false), r("active", 5, true)}, "active"},      // active stays
		{[]quotav1alpha1.ResourceRegistration{r("x", 3, true), r("y", 2, true), r("z", 1, false)}, "y"}, // a race settles
	}
	for i, tc := range cases {
		if got := activeRegistration(tc.regs, rtProjects); got == nil || got.Name != tc.want {
			t.Errorf("case %d: got %v, want %s", i, got, tc.want)
		}
	}
	if got := activeRegistration(nil, rtProjects); got != nil {
		t.Errorf("no registrations gave %s", got.Name)
	}
}

func TestDecisionStatus(t *testing.T) {
	c := planClaim("c", 20, "")
	c.Spec.Requests = []quotav1alpha1.ResourceRequest{{ResourceType: "users", Amount: 20}, {ResourceType: "projects", Amount: 1}}
	d := ledger.Decision{Requests: []ledger.RequestDecision{
		{Request: ledger.Request{ResourceType: "projects", Amount: 1}, Bucket: "b-projects", Reason: ledger.ReasonQuotaAvailable,
			Message: "requested 1 of projects, available 4 of 5 (allocated 1, reserved 0)"},
		{Request: ledger.Request{ResourceType: "users", Amount: 20}, Bucket: "b-users", Reason: ledger.ReasonQuotaExceeded,
			Message: "requested 20 of users, available 10 of 15 (allocated 5, reserved 0)"},
	}}
	now := metav1.NewTime(time.Unix(100, 0))
	st := decisionStatus(&c, d, now)
	cond := st.Conditions[0]
	if cond.Status != metav1.ConditionFalse || cond.Reason != "QuotaExceeded" || cond.ObservedGeneration != 1 ||
		cond.Message != "quota exceeded: requested 20 of users, available 10 of 15 (allocated 5, reserved 0)" {
		t.Fatalf("condition %+v", cond)
	}
	if st.Allocations[0].ResourceType != "users" || st.Allocations[0].Status != "Denied" || st.Allocations[0].Reason != "QuotaExceeded" ||
		st.Allocations[1].ResourceType != "projects" || st.Allocations[1].Status != "Denied" || st.Allocations[1].AllocatedAmount != 0 {
		t.Fatalf("allocations %+v", st.Allocations)
	}
	if !sameClaimStatus(st, decisionStatus(&c, d, metav1.NewTime(time.Unix(200, 0)))) {
		t.Fatal("the same decision at another time reads as a change")
	}
}
