package controllers

// Serves the claim controller (claim_controller.go): a ResourceClaim as the
// ledger sees it.

import (
	"github.com/quotakeeper/quotakeeper/internal/ledger"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// ledgerClaim converts a ResourceClaim into the ledger's claim: one request
// per spec request, in order, under the claim's uid, which is also the id
// the observer folds the reservation by when it counts the Granted claim.
// The reservation's object is the claim itself, not its resourceRef: the
// claim is what holds the quota, and while it exists the observer does not
// expire its reservation.
func ledgerClaim(c *quotav1alpha1.ResourceClaim) ledger.Claim {
	out := ledger.Claim{
		ID:     string(c.UID),
		Object: ledger.ObjectRef{APIGroup: quotav1alpha1.GroupVersion.Group, Kind: "ResourceClaim", Namespace: c.Namespace, Name: c.Name, UID: string(c.UID)},
	}
	consumer := ledgerconv.Consumer(c.Spec.ConsumerRef)
	for _, r := range c.Spec.Requests {
		out.Requests = append(out.Requests, ledger.Request{Consumer: consumer, ResourceType: r.ResourceType, Amount: r.Amount, Dimensions: r.Dimensions})
	}
	return out
}
