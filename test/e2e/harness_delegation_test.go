package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

// actEditCap is the platform team's edit of a delegation lane: a label on
// the cap's grant, which changes nothing handed out.
const actEditCap = "cap grant edit"

// delegationLane: an Organization's admin (impersonated, under the shipped
// role) hands its cap of 10 out to two namespaces through a pool of 4
// grant names in each: creates of 1 to 4, raises and lowerings of 1 to 3,
// deletes. The truth is the sum of the live hand-outs, from one list.
func delegationLane(t *testing.T, prefix string) *harnessLane {
	t.Helper()
	const rt, limit, pool = "e2e.quota/exactness-delegated", 10, 4
	const laneLabel = "e2e.quota/exactness-lane"
	orgLabel := quotav1alpha1.ConsumerLabelKey(orgGroup, "Organization")
	org := quotav1alpha1.ConsumerRef{APIGroup: orgGroup, Kind: "Organization", Name: prefix}
	namespaces := []string{prefix + "-1", prefix + "-2"}
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	grant(t, prefix+"-cap", org, quotav1alpha1.DelegatedResourceType(rt), limit)
	for _, ns := range namespaces {
		namespace(t, ns, map[string]string{orgLabel: org.Name})
		bindRole(t, ns, prefix+"-admin", delegatedAdminRole)
	}
	admin := impersonating(t, prefix+"-admin", nil)
	truth := func(ctx context.Context) ([]int64, error) {
		var list quotav1alpha1.ResourceGrantList
		if err := cluster.Client.List(ctx, &list, client.MatchingLabels{laneLabel: prefix}); err != nil {
			return nil, err
		}
		var sum int64
		for _, g := range list.Items {
			for _, a := range g.Spec.Allowances {
				for _, b := range a.Buckets {
					sum += b.Amount
				}
			}
		}
		return []int64{sum}, nil
	}
	return &harnessLane{
		name:    "delegated allowances (Organization's cap)",
		actions: []string{actCreate, actCreate, actGrow, actGrow, actShrink, actDelete},
		edit:    actEditCap,
		buckets: []harnessBucket{{org, quotav1alpha1.DelegatedResourceType(rt), limit}},
		truth:   truth,
		act: func(ctx context.Context, act string, rng *rand.Rand, say sayFunc) error {
			if act == actEditCap {
				g := &quotav1alpha1.ResourceGrant{}
				if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: quotav1alpha1.DefaultSystemNamespace, Name: prefix + "-cap"}, g); err != nil {
					return err
				}
				g.Labels = map[string]string{"e2e.quota/edit": fmt.Sprint(rng.IntN(1000))}
				return cluster.Client.Update(ctx, g)
			}
			ns := namespaces[rng.IntN(len(namespaces))]
			name, err := drawName(ctx, rng, act, &quotav1alpha1.ResourceGrantList{}, ns, "g-", pool)
			if err != nil {
				return err
			}
			if act == actCreate {
				amount := int64(1 + rng.IntN(4))
				say("%s/%s at %d", ns, name, amount)
				g := builders.Grant(name, ns).Consumer(quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}).
					DelegatedFrom(org).Allowance(rt, amount).Labels(map[string]string{laneLabel: prefix}).Obj()
				if err := notExisting(ctx, ns, name, &quotav1alpha1.ResourceGrant{}); err != nil {
					return err
				}
				return admin.Create(ctx, g)
			}
			g := &quotav1alpha1.ResourceGrant{}
			if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, g); err != nil {
				return absent(err)
			}
			if act == actDelete {
				say("%s/%s at %d", ns, name, g.Spec.Allowances[0].Buckets[0].Amount)
				return admin.Delete(ctx, g, client.Preconditions{UID: &g.UID, ResourceVersion: &g.ResourceVersion})
			}
			amount := &g.Spec.Allowances[0].Buckets[0].Amount
			delta := int64(1 + rng.IntN(3))
			if act == actShrink {
				if *amount == 0 {
					return errNotApplicable
				}
				delta = -min(delta, *amount)
			}
			say("%s/%s from %d to %d", ns, name, *amount, *amount+delta)
			*amount += delta
			return admin.Update(ctx, g)
		},
	}
}
