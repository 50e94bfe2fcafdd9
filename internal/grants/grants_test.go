package grants_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/grants"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

var acme = v1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}

// acmeCompute starts the grant every test here converts or checks.
func acmeCompute() *builders.GrantWrapper {
	return builders.Grant("acme-compute", "quotakeeper-system").Generation(4).Consumer(acme)
}

func TestFromResourceGrantNumbersBucketAmountsAcrossAllowances(t *testing.T) {
	dfw := &metav1.LabelSelector{MatchLabels: map[string]string{"networking.datumapis.com/location": "DFW"}}
	g := acmeCompute().Allowances(
		v1alpha1.Allowance{ResourceType: "compute/cpu", Buckets: []v1alpha1.GrantBucket{
			{Amount: 100000},
			{Amount: 500000, DimensionSelector: dfw},
		}},
		v1alpha1.Allowance{ResourceType: "compute/instances", Buckets: []v1alpha1.GrantBucket{
			{Amount: 10, DimensionSelector: &metav1.LabelSelector{}},
		}},
	).Obj()
	got, err := grants.FromResourceGrant(g)
	if err != nil {
		t.Fatal(err)
	}
	consumer := ledger.Consumer{APIGroup: acme.APIGroup, Kind: acme.Kind, Name: acme.Name}
	want := []struct {
		id, resourceType string
		amount           int64
		selector         string // "" for nil: every bucket
	}{
		{"quotakeeper-system/acme-compute#0", "compute/cpu", 100000, ""},
		{"quotakeeper-system/acme-compute#1", "compute/cpu", 500000, "networking.datumapis.com/location=DFW"},
		{"quotakeeper-system/acme-compute#2", "compute/instances", 10, ""},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d grants, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.id || g.ResourceType != w.resourceType || g.Amount != w.amount || g.Consumer != consumer || g.Generation != 4 {
			t.Errorf("grant %d: got %+v, want %+v", i, g, w)
		}
		sel := ""
		if g.Selector != nil {
			sel = g.Selector.String()
		}
		if sel != w.selector {
			t.Errorf("grant %d: selector %q, want %q", i, sel, w.selector)
		}
	}
	// An empty selector selects every bucket, as the API promises; absent too.
	if got[2].Selector != nil {
		t.Errorf("empty selector became %v, want nil (every bucket)", got[2].Selector)
	}
	if !got[1].Selector.Matches(labels.Set{"networking.datumapis.com/location": "DFW"}) || got[1].Selector.Matches(labels.Set{}) {
		t.Errorf("selector %v does not match as written", got[1].Selector)
	}
}

func TestFromResourceGrantRejectsInvalidGrantsWithFieldPaths(t *testing.T) {
	g := acmeCompute().Allowances(v1alpha1.Allowance{ResourceType: "", Buckets: []v1alpha1.GrantBucket{
		{Amount: -1},
		{Amount: 1, DimensionSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "zone", Operator: "Near", Values: []string{"a"}},
		}}},
	}}).Obj()
	g.Spec.ConsumerRef.Name = ""
	out, err := grants.FromResourceGrant(g)
	if out != nil {
		t.Errorf("returned %d grants with an error", len(out))
	}
	want := `ResourceGrant quotakeeper-system/acme-compute: [spec.consumerRef.name: Required value, ` +
		`spec.allowances[0].resourceType: Required value, ` +
		`spec.allowances[0].buckets[0].amount: Invalid value: -1: must not be negative, ` +
		`spec.allowances[0].buckets[1].dimensionSelector: Invalid value: {"matchExpressions":[{"key":"zone","operator":"Near","values":["a"]}]}: "Near" is not a valid label selector operator]`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n got %v\nwant %s", err, want)
	}
}
