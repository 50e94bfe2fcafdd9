package controllers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

// These tests cover the pure parts of the controllers: what they decide
// from what they read. The envtest suite covers the rest against a real
// apiserver.

var acme = ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}

const rtProjects = "resourcemanager.miloapis.com/projects"

func planClaim(uid string, amount int64) quotav1alpha1.ResourceClaim {
	return *builders.Claim(uid, "team").UID(types.UID(uid)).Generation(1).Consumer(ledgerconv.ConsumerRef(acme)).
		Request(rtProjects, amount, nil).Obj()
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

func TestActiveRegistrationKeepsTheActiveOne(t *testing.T) {
	at := func(sec int64) time.Time { return time.Unix(sec, 0) }
	r := func(name string, created int64, active bool) quotav1alpha1.ResourceRegistration {
		out := builders.Registration(name, rtProjects).Created(at(created))
		if active {
			out.Condition(quotav1alpha1.ConditionActive, metav1.ConditionTrue, 0, "")
		}
		return *out.Obj()
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
	c := planClaim("c", 20)
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
	if !quotav1alpha1.SameClaimStatus(st, decisionStatus(&c, d, metav1.NewTime(time.Unix(200, 0)))) {
		t.Fatal("the same decision at another time reads as a change")
	}
}
