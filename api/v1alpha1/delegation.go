package v1alpha1

import "strings"

// DelegatedFrom names the parent consumer whose cap a delegated allowance
// draws from. The parent's cap of a resource type is what the platform's
// grants give it of DelegatedResourceType(resourceType); the sum of the
// amounts its children are handed (ResourceGrants with spec.delegatedFrom
// naming it) may not exceed it.
type DelegatedFrom struct {
	// ConsumerRef is the parent consumer (an Organization, say) whose cap
	// this grant draws from. The grant's namespace must belong to it (carry
	// its consumer label).
	ConsumerRef ConsumerRef `json:"consumerRef"`
}

// delegatedPrefix marks a cap to hand out: a grant of
// "delegated/core/configmaps" to Organization acme lets acme's admin hand
// out that many core/configmaps to acme's namespaces, and the bucket of
// that type counts what is handed out. A registration may not use it
// (validation.ValidateRegistration), so no claim can ever count into such a
// bucket by accident.
const delegatedPrefix = "delegated/"

// DelegatedResourceType is the resource type of a parent's cap to hand out
// resourceType, and of the bucket, keyed by the parent, that counts what is
// handed out: its limit is the sum of the parent's grants of this type (the
// cap), its allocated the sum of the live delegated amounts, its
// reservations the hand-outs admitted and not yet counted.
func DelegatedResourceType(resourceType string) string { return delegatedPrefix + resourceType }

// DelegatedBase returns the resource type a delegation bucket's type counts
// hand-outs of, and whether resourceType is one.
func DelegatedBase(resourceType string) (string, bool) {
	return strings.CutPrefix(resourceType, delegatedPrefix)
}

// IsDelegated reports whether the grant hands out part of a parent's cap.
func (g *ResourceGrant) IsDelegated() bool { return g != nil && g.Spec.DelegatedFrom != nil }
