package delegation_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/delegation"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

const configmaps, secrets = "core/configmaps", "core/secrets"

var (
	acme  = quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}
	teamA = quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-a"}
	teamB = quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-b"}
)

// handOut is a delegated grant of acme's cap to ns.
func handOut(ns string, generation int64, allowances ...quotav1alpha1.Allowance) *quotav1alpha1.ResourceGrant {
	g := builders.Grant(ns+"-quota", ns).Consumer(quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}).
		DelegatedFrom(acme).Generation(generation).Allowances(allowances...).Obj()
	g.UID = types.UID("uid-" + ns)
	return g
}

func TestClaimReservesWhatGrowsInTheParentsDelegationBucket(t *testing.T) {
	parent := ledgerconv.Consumer(acme)
	object := ledger.ObjectRef{APIGroup: "quota.miloapis.com", Kind: "ResourceGrant", Namespace: "team-a", Name: "team-a-quota", UID: "uid-team-a"}
	cases := []struct {
		name     string
		old, new *quotav1alpha1.ResourceGrant
		want     *ledger.Claim // nil: nothing to reserve
	}{
		{"create reserves every amount under the grant's uid",
			nil, handOut("team-a", 1, builders.Allowance(configmaps, 4, 2), builders.Allowance(secrets, 3)),
			&ledger.Claim{ID: "uid-team-a", Object: object, Requests: []ledger.Request{
				{Consumer: parent, ResourceType: "delegated/core/configmaps", Amount: 6},
				{Consumer: parent, ResourceType: "delegated/core/secrets", Amount: 3},
			}}},
		{"a raise reserves its growth under the new generation",
			handOut("team-a", 1, builders.Allowance(configmaps, 6)), handOut("team-a", 2, builders.Allowance(configmaps, 7)),
			&ledger.Claim{ID: "uid-team-a/2/delegated", Object: object, Requests: []ledger.Request{
				{Consumer: parent, ResourceType: "delegated/core/configmaps", Amount: 1},
			}}},
		{"a lowering reserves nothing",
			handOut("team-a", 1, builders.Allowance(configmaps, 6)), handOut("team-a", 2, builders.Allowance(configmaps, 1)), nil},
		{"lowering one type and raising another reserves only the raise",
			handOut("team-a", 1, builders.Allowance(configmaps, 6), builders.Allowance(secrets, 1)),
			handOut("team-a", 2, builders.Allowance(configmaps, 2), builders.Allowance(secrets, 5)),
			&ledger.Claim{ID: "uid-team-a/2/delegated", Object: object, Requests: []ledger.Request{
				{Consumer: parent, ResourceType: "delegated/core/secrets", Amount: 4},
			}}},
		{"a platform grant reserves nothing",
			nil, builders.Grant("platform", "team-a").Consumer(teamA).Allowance(configmaps, 100).Obj(), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := delegation.Claim(tc.old, tc.new)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if ok {
					t.Fatalf("reserves %+v, want nothing", got)
				}
				return
			}
			if diff := cmp.Diff(*tc.want, got); !ok || diff != "" {
				t.Fatalf("claim (ok %v), -want +got:\n%s", ok, diff)
			}
		})
	}
}

func TestObservationSumsTheLiveHandOutsByNamespace(t *testing.T) {
	grants := []quotav1alpha1.ResourceGrant{
		*handOut("team-b", 3, builders.Allowance(configmaps, 4)),
		*handOut("team-a", 2, builders.Allowance(configmaps, 6), builders.Allowance(secrets, 1)),
		*builders.Grant("platform", "team-a").Consumer(teamA).Allowance(configmaps, 100).Obj(),
	}
	tally, errs := delegation.Count(grants)
	if errs != nil {
		t.Fatal(errs)
	}
	key := delegation.Key(ledgerconv.Consumer(acme), configmaps)
	obs, err := tally.Observation(key)
	if err != nil {
		t.Fatal(err)
	}
	want := ledger.Observation{
		Allocated: 10, Count: 2, ByNamespace: map[string]int64{"team-a": 6, "team-b": 4},
		Counted: map[string]ledger.CountedAt{"uid-team-a": {Generation: 2, Amount: 6}, "uid-team-b": {Generation: 3, Amount: 4}},
	}
	if diff := cmp.Diff(want, obs); diff != "" {
		t.Errorf("observation, -want +got:\n%s", diff)
	}
	if got := tally[key][0].Grant; got != "team-a/team-a-quota" {
		t.Errorf("children not sorted by grant: first %s", got)
	}
}

func TestDenialNamesTheCapWhatIsHandedOutAndToWhom(t *testing.T) {
	grants := []quotav1alpha1.ResourceGrant{
		*handOut("team-a", 1, builders.Allowance(configmaps, 6)),
		*handOut("team-b", 1, builders.Allowance(configmaps, 4)),
	}
	tally, _ := delegation.Count(grants)
	parent := ledgerconv.Consumer(acme)
	key := delegation.Key(parent, configmaps)
	rd := ledger.RequestDecision{
		Request: ledger.Request{Consumer: parent, ResourceType: key.ResourceType, Amount: 1},
		Reason:  ledger.ReasonQuotaExceeded, Limit: 10, Allocated: 10, Reserved: 0, Available: 0,
	}
	got := delegation.Denial(parent, ledgerconv.Consumer(teamB), rd, tally[key])
	want := "cap exceeded: Organization acme's cap of core/configmaps is 10, handed out 10 " +
		"(6 to Namespace team-a (team-a/team-a-quota), 4 to Namespace team-b (team-b/team-b-quota)), in flight 0, available 0: " +
		"cannot hand out 1 more to Namespace team-b"
	if got != want {
		t.Errorf("denial:\n got %s\nwant %s", got, want)
	}
}
