package controllers

// Serves the claim controller (claim_controller.go): the status it writes
// for a decision.

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// decisionStatus renders a ledger decision: one allocation per request, in
// spec order, and the Granted condition whose message carries the numbers
// that decided it (ledger.Decision.Message).
func decisionStatus(c *quotav1alpha1.ResourceClaim, d ledger.Decision, now metav1.Time) quotav1alpha1.ResourceClaimStatus {
	byType := map[string]ledger.RequestDecision{}
	for _, rd := range d.Requests {
		byType[rd.Request.ResourceType] = rd
	}
	allocs := make([]quotav1alpha1.RequestAllocation, len(c.Spec.Requests))
	for i, req := range c.Spec.Requests {
		rd := byType[req.ResourceType]
		a := quotav1alpha1.RequestAllocation{ResourceType: req.ResourceType, Status: quotav1alpha1.AllocationDenied,
			Reason: rd.Reason, Message: rd.Message, LastTransitionTime: now}
		if d.Granted {
			a.Status, a.AllocatedAmount, a.AllocatingBucket = quotav1alpha1.AllocationGranted, rd.Request.Amount, rd.Bucket
		}
		allocs[i] = a
	}
	cond := metav1.Condition{Type: quotav1alpha1.ConditionGranted, Status: metav1.ConditionTrue,
		Reason: quotav1alpha1.ReasonQuotaAvailable, Message: d.Message()}
	if !d.Granted {
		cond.Status, cond.Reason = metav1.ConditionFalse, quotav1alpha1.ReasonQuotaExceeded
		cond.Message = "quota exceeded: " + d.Message()
	}
	return claimStatus(c, allocs, cond, now)
}

// invalidStatus denies every request of a claim that cannot be judged.
func invalidStatus(c *quotav1alpha1.ResourceClaim, msg string, now metav1.Time) quotav1alpha1.ResourceClaimStatus {
	return uniformStatus(c, quotav1alpha1.AllocationDenied, metav1.ConditionFalse, quotav1alpha1.ReasonValidationFailed, msg, now)
}

// pendingStatus says a claim is not decided yet, and why.
func pendingStatus(c *quotav1alpha1.ResourceClaim, msg string, now metav1.Time) quotav1alpha1.ResourceClaimStatus {
	return uniformStatus(c, quotav1alpha1.AllocationPending, metav1.ConditionUnknown, quotav1alpha1.ReasonPendingEvaluation, msg, now)
}

func uniformStatus(c *quotav1alpha1.ResourceClaim, st quotav1alpha1.AllocationStatus, cs metav1.ConditionStatus, reason, msg string, now metav1.Time) quotav1alpha1.ResourceClaimStatus {
	allocs := make([]quotav1alpha1.RequestAllocation, len(c.Spec.Requests))
	for i, req := range c.Spec.Requests {
		allocs[i] = quotav1alpha1.RequestAllocation{ResourceType: req.ResourceType, Status: st, Reason: reason, Message: msg, LastTransitionTime: now}
	}
	return claimStatus(c, allocs, metav1.Condition{Type: quotav1alpha1.ConditionGranted, Status: cs, Reason: reason, Message: msg}, now)
}

// claimStatus assembles a status, keeping transition times that did not
// transition.
func claimStatus(c *quotav1alpha1.ResourceClaim, allocs []quotav1alpha1.RequestAllocation, cond metav1.Condition, now metav1.Time) quotav1alpha1.ResourceClaimStatus {
	st := quotav1alpha1.ResourceClaimStatus{ObservedGeneration: c.Generation, Allocations: allocs}
	st.Conditions = append(st.Conditions, c.Status.Conditions...)
	cond.ObservedGeneration, cond.LastTransitionTime = c.Generation, now
	meta.SetStatusCondition(&st.Conditions, cond)
	for i := range st.Allocations {
		for _, old := range c.Status.Allocations {
			if old.ResourceType == st.Allocations[i].ResourceType && old.Status == st.Allocations[i].Status {
				st.Allocations[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	return st
}
