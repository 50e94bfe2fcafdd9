package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// EffectiveResourceGrantSpec names the consumer and resource type summarized.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type EffectiveResourceGrantSpec struct {
	// ConsumerRef is the consumer summarized.
	ConsumerRef ConsumerRef `json:"consumerRef"`
	// ResourceType is the resource type summarized.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ResourceType string `json:"resourceType"`
}

// BucketRef summarizes one bucket behind an effective grant.
type BucketRef struct {
	// Name of the AllowanceBucket.
	Name string `json:"name"`
	// Namespace of the AllowanceBucket.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Dimensions of the bucket.
	// +optional
	Dimensions map[string]string `json:"dimensions,omitempty"`
	Limit      int64             `json:"limit"`
	Allocated  int64             `json:"allocated"`
	Reserved   int64             `json:"reserved"`
	Available  int64             `json:"available"`
}

// EffectiveResourceGrantStatus totals a consumer's buckets of one resource type.
type EffectiveResourceGrantStatus struct {
	// TotalLimit is the sum of the bucket limits.
	TotalLimit int64 `json:"totalLimit"`
	// TotalAllocated is the sum of the bucket allocations.
	TotalAllocated int64 `json:"totalAllocated"`
	// TotalReserved is the sum of the bucket reservations.
	TotalReserved int64 `json:"totalReserved"`
	// Available is the sum of what each bucket still has available.
	Available int64 `json:"available"`
	// Units are the units of the resource type's active ResourceRegistration,
	// copied here because a tenant may not read registrations (they are
	// cluster-scoped). Absent while no registration of the type is active.
	// +optional
	Units *Units `json:"units,omitempty"`
	// Display is the totals as people read them: in the display unit when
	// the registration declares one ("8 cores", "0.5 cores", exact: a
	// fraction such as "10/3 dozens" when the decimal would not end), else
	// in the base unit ("5 configmaps"), else bare numbers. The totals above
	// stay the exact base-unit amounts.
	// +optional
	Display *DisplayTotals `json:"display,omitempty"`
	// AllowanceBucketRefs are the buckets behind the totals.
	// +listType=atomic
	// +optional
	AllowanceBucketRefs []BucketRef `json:"allowanceBucketRefs,omitempty"`
	// Delegated is the part of the limit that parents' admins handed out
	// of their caps (ResourceGrants with spec.delegatedFrom), per parent;
	// the rest is the platform's own grants. Absent when nothing is
	// delegated.
	// +listType=atomic
	// +optional
	Delegated []DelegatedPart `json:"delegated,omitempty"`
}

// DelegatedPart is what one parent handed a consumer out of its cap.
type DelegatedPart struct {
	// ConsumerRef is the parent whose cap it comes out of.
	ConsumerRef ConsumerRef `json:"consumerRef"`
	// Amount handed out, in the base unit.
	Amount int64 `json:"amount"`
	// Grants are the delegated ResourceGrants that hand it out, as
	// namespace/name.
	// +listType=atomic
	Grants []string `json:"grants"`
}

// DisplayTotals are an EffectiveResourceGrant's totals written for people.
type DisplayTotals struct {
	Limit     string `json:"limit"`
	Allocated string `json:"allocated"`
	Reserved  string `json:"reserved"`
	Available string `json:"available"`
}

// EffectiveResourceGrant is the read-only view of a consumer's quota for one
// resource type, kept in each namespace of the consumer for tenants to read.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +genclient
// +kubebuilder:resource:shortName=erg,categories=quotakeeper
// +kubebuilder:printcolumn:name="Consumer Kind",type=string,JSONPath=`.spec.consumerRef.kind`
// +kubebuilder:printcolumn:name="Consumer",type=string,JSONPath=`.spec.consumerRef.name`
// +kubebuilder:printcolumn:name="Resource Type",type=string,JSONPath=`.spec.resourceType`
// +kubebuilder:printcolumn:name="Limit",type=string,JSONPath=`.status.display.limit`
// +kubebuilder:printcolumn:name="Allocated",type=string,JSONPath=`.status.display.allocated`
// +kubebuilder:printcolumn:name="Reserved",type=string,JSONPath=`.status.display.reserved`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.display.available`
// +kubebuilder:printcolumn:name="Base Unit",type=string,JSONPath=`.status.units.baseUnit`,priority=1
// +kubebuilder:printcolumn:name="Base Limit",type=integer,JSONPath=`.status.totalLimit`,priority=1
// +kubebuilder:printcolumn:name="Base Allocated",type=integer,JSONPath=`.status.totalAllocated`,priority=1
// +kubebuilder:printcolumn:name="Base Reserved",type=integer,JSONPath=`.status.totalReserved`,priority=1
// +kubebuilder:printcolumn:name="Base Available",type=integer,JSONPath=`.status.available`,priority=1
type EffectiveResourceGrant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EffectiveResourceGrantSpec   `json:"spec"`
	Status EffectiveResourceGrantStatus `json:"status,omitempty"`
}

// EffectiveResourceGrantList is a list of EffectiveResourceGrants.
// +kubebuilder:object:root=true
type EffectiveResourceGrantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EffectiveResourceGrant `json:"items"`
}

func init() {
	register(&EffectiveResourceGrant{}, &EffectiveResourceGrantList{})
}
