package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClaimFinalizer holds a claim until its allocation has been returned to its buckets.
const ClaimFinalizer = "quota.miloapis.com/resource-claim-cleanup"

// ViewLabel, set to "true", marks a ResourceClaim that the observer writes as
// a view of what one live object counts. A view holds nothing: the object is
// counted, not the claim, so the claim controller never decides a view, the
// observer never counts one, and deleting one frees nothing (the observer
// writes it again). The label cannot be added to or removed from an existing
// claim, so a decided claim never turns into a view or back.
const ViewLabel = LabelPrefix + "/view"

// AutoCreatedLabel, set to "true", is Milo's mark of a ResourceClaim that
// quota wrote for an object rather than an owning service: every view
// carries it, as Milo's claims for policy-triggered objects do, so tools
// written for Milo find them.
const AutoCreatedLabel = LabelPrefix + "/auto-created"

// IsView reports whether a claim's labels mark it as a view.
func IsView(labels map[string]string) bool { return labels[ViewLabel] == "true" }

// ResourceClaimSpec asks for amounts of one or more resource types, all or nothing.
// The spec cannot change once created: a different request is a different claim.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type ResourceClaimSpec struct {
	// ConsumerRef is the consumer whose quota is claimed.
	ConsumerRef ConsumerRef `json:"consumerRef"`

	// Requests are the amounts claimed, one per resource type.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=map
	// +listMapKey=resourceType
	Requests []ResourceRequest `json:"requests"`

	// ResourceRef is the object the claim is for.
	// +optional
	ResourceRef *ObjectRef `json:"resourceRef,omitempty"`
}

// ResourceRequest asks for an amount of one resource type.
type ResourceRequest struct {
	// ResourceType names an active ResourceRegistration's resourceType.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ResourceType string `json:"resourceType"`

	// Amount in the registration's base unit.
	// +kubebuilder:validation:Minimum=1
	Amount int64 `json:"amount"`

	// Dimensions place the request in a bucket, such as a location; keys must be
	// declared by the registration.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	Dimensions map[string]string `json:"dimensions,omitempty"`
}

// AllocationStatus is the per-request outcome of a claim.
// +kubebuilder:validation:Enum=Granted;Denied;Pending
type AllocationStatus string

const (
	AllocationGranted AllocationStatus = "Granted"
	AllocationDenied  AllocationStatus = "Denied"
	AllocationPending AllocationStatus = "Pending"
)

// RequestAllocation is the decision on one request of a claim.
type RequestAllocation struct {
	// ResourceType of the request this decision is for.
	ResourceType string `json:"resourceType"`
	// Status of the request: Granted, Denied or Pending.
	Status AllocationStatus `json:"status"`
	// Reason is a CamelCase reason for the status.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message explains the status with the numbers that decided it.
	// +optional
	Message string `json:"message,omitempty"`
	// AllocatedAmount is the amount taken from the bucket; zero unless granted.
	// +optional
	AllocatedAmount int64 `json:"allocatedAmount,omitempty"`
	// AllocatingBucket is the name of the AllowanceBucket the amount came from.
	// +optional
	AllocatingBucket string `json:"allocatingBucket,omitempty"`
	// LastTransitionTime is when the status last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// ResourceClaimStatus reports the decision on a claim.
type ResourceClaimStatus struct {
	// ObservedGeneration is the generation the decision describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Allocations are the decisions per request.
	// +listType=map
	// +listMapKey=resourceType
	// +optional
	Allocations []RequestAllocation `json:"allocations,omitempty"`
	// Conditions: Granted.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ResourceClaim asks for quota on behalf of an object; it is granted all or nothing.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +genclient
// +kubebuilder:resource:shortName=rclaim,categories=quotakeeper
// +kubebuilder:printcolumn:name="Consumer Kind",type=string,JSONPath=`.spec.consumerRef.kind`
// +kubebuilder:printcolumn:name="Consumer",type=string,JSONPath=`.spec.consumerRef.name`
// +kubebuilder:printcolumn:name="Granted",type=string,JSONPath=`.status.conditions[?(@.type=="Granted")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Granted")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ResourceClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ResourceClaimSpec   `json:"spec"`
	Status ResourceClaimStatus `json:"status,omitempty"`
}

// ResourceClaimList is a list of ResourceClaims.
// +kubebuilder:object:root=true
type ResourceClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceClaim `json:"items"`
}

func init() {
	register(&ResourceClaim{}, &ResourceClaimList{})
}

// Decided reports whether the claim carries a decision for its current
// generation: Granted True or False. Until then it is pending: not judged
// yet, or Granted=Unknown while the claim controller waits or retries. A
// decision is final (the spec is immutable).
func (c *ResourceClaim) Decided() bool {
	return IsTrue(c.Status.Conditions, ConditionGranted, c.Generation) ||
		IsFalse(c.Status.Conditions, ConditionGranted, c.Generation)
}

// SameClaimStatus reports whether two claim statuses say the same thing,
// transition times aside: a writer that would only move a time writes
// nothing.
func SameClaimStatus(a, b ResourceClaimStatus) bool {
	a, b = *a.DeepCopy(), *b.DeepCopy()
	for _, st := range []*ResourceClaimStatus{&a, &b} {
		for i := range st.Conditions {
			st.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		for i := range st.Allocations {
			st.Allocations[i].LastTransitionTime = metav1.Time{}
		}
	}
	return equality.Semantic.DeepEqual(a, b)
}
