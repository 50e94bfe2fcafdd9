package delegation

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// Key is the delegation bucket of parent for resourceType: it counts what
// parent's admin has handed out of parent's cap of resourceType.
func Key(parent ledger.Consumer, resourceType string) ledger.BucketKey {
	return ledger.NewBucketKey(parent, quotav1alpha1.DelegatedResourceType(resourceType), nil)
}

// Amounts is what a delegated grant hands out, per resource type: the sum of
// its bucket amounts (a delegated amount selects no dimensions, so each
// applies whole). Nil for a platform grant or none. An overflowing sum is an
// error: the grant webhook refuses such a grant before it is stored.
func Amounts(g *quotav1alpha1.ResourceGrant) (map[string]int64, error) {
	if !g.IsDelegated() {
		return nil, nil
	}
	out := map[string]int64{}
	for _, a := range g.Spec.Allowances {
		for _, b := range a.Buckets {
			sum, err := ledger.Add(out[a.ResourceType], b.Amount)
			if err != nil {
				return nil, fmt.Errorf("ResourceGrant %s/%s: amounts of %s: %w", g.Namespace, g.Name, a.ResourceType, err)
			}
			out[a.ResourceType] = sum
		}
	}
	return out, nil
}

// Parent is the consumer a delegated grant draws from.
func Parent(g *quotav1alpha1.ResourceGrant) ledger.Consumer {
	return ledgerconv.Consumer(g.Spec.DelegatedFrom.ConsumerRef)
}

// ClaimID is the id a hand-out is reserved under: the grant's uid for its
// create, "<uid>/<generation>/delegated" for an update's growth. The
// delegation controller folds it once it counts the grant at that
// generation or later (ledger.Reservation.FoldedBy with no Total): a
// grant's generation moves with every change of its spec, so a later
// generation is counted at an amount that was admitted in its own right.
func ClaimID(g *quotav1alpha1.ResourceGrant, update bool) string {
	if !update {
		return string(g.UID)
	}
	return string(g.UID) + "/" + strconv.FormatInt(g.Generation, 10) + "/delegated"
}

// Claim is what an admitted create (old nil) or update of a delegated grant
// must reserve: for each resource type whose amount grows, the growth, in
// the parent's delegation bucket. ok is false when nothing grows (a
// platform grant, a lowering, a change of labels): such a change is always
// admitted. Lowering one amount and raising another in one update reserves
// only the raise; the lowering is given back when it is observed.
func Claim(old, g *quotav1alpha1.ResourceGrant) (claim ledger.Claim, ok bool, err error) {
	now, err := Amounts(g)
	if err != nil || now == nil {
		return ledger.Claim{}, false, err
	}
	before, err := Amounts(old)
	if err != nil {
		return ledger.Claim{}, false, err
	}
	claim = ledger.Claim{
		ID:     ClaimID(g, old != nil),
		Object: ledger.ObjectRef{APIGroup: quotav1alpha1.GroupVersion.Group, Kind: "ResourceGrant", Namespace: g.Namespace, Name: g.Name, UID: string(g.UID)},
	}
	parent := Parent(g)
	for _, rt := range slices.Sorted(maps.Keys(now)) {
		growth := now[rt] - before[rt] // both checked sums of non-negative amounts
		if growth <= 0 {
			continue
		}
		claim.Requests = append(claim.Requests, ledger.Request{
			Consumer: parent, ResourceType: quotav1alpha1.DelegatedResourceType(rt), Amount: growth,
		})
	}
	return claim, len(claim.Requests) > 0, nil
}
