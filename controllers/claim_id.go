package controllers

// Serves the claim controller (claim_controller.go), and the bucket
// controller's drift repair: a ResourceClaim as the ledger sees it.

import (
	"github.com/quotakeeper/quotakeeper/ledger"

	"github.com/quotakeeper/quotakeeper/api/ledgerconv"
	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// claimID is the ledger claim id a ResourceClaim's entries are recorded
// under: the reservation-id annotation of a claim made from an admission
// reservation, else the claim's own uid (docs/architecture.md).
func claimID(c *quotav1alpha1.ResourceClaim) string {
	if id := c.Annotations[quotav1alpha1.ReservationIDAnnotation]; id != "" {
		return id
	}
	return string(c.UID)
}

// ledgerClaim converts a ResourceClaim into the ledger's claim: one request
// per spec request, in order. The object is the claim's resourceRef, or the
// claim itself when it names none.
func ledgerClaim(c *quotav1alpha1.ResourceClaim) ledger.Claim {
	out := ledger.Claim{ID: claimID(c)}
	if ref := c.Spec.ResourceRef; ref != nil {
		out.Object = ledgerconv.Object(*ref)
	} else {
		out.Object = ledger.ObjectRef{APIGroup: quotav1alpha1.GroupVersion.Group, Kind: "ResourceClaim", Namespace: c.Namespace, Name: c.Name, UID: string(c.UID)}
	}
	consumer := ledgerconv.Consumer(c.Spec.ConsumerRef)
	for _, r := range c.Spec.Requests {
		out.Requests = append(out.Requests, ledger.Request{Consumer: consumer, ResourceType: r.ResourceType, Amount: r.Amount, Dimensions: r.Dimensions})
	}
	return out
}

// claimBucketKeys are the buckets a claim draws on, one per request.
func claimBucketKeys(c *quotav1alpha1.ResourceClaim) []ledger.BucketKey {
	consumer := ledgerconv.Consumer(c.Spec.ConsumerRef)
	out := make([]ledger.BucketKey, len(c.Spec.Requests))
	for i, r := range c.Spec.Requests {
		out[i] = ledger.NewBucketKey(consumer, r.ResourceType, r.Dimensions)
	}
	return out
}
