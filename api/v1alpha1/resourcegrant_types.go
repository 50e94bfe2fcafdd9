package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ResourceGrantSpec gives a consumer allowances of one or more resource types.
// +kubebuilder:validation:XValidation:rule="has(self.delegatedFrom) == has(oldSelf.delegatedFrom) && (!has(self.delegatedFrom) || self.delegatedFrom == oldSelf.delegatedFrom)",message="spec.delegatedFrom is immutable: a platform grant cannot become a delegated one, nor the other way round",fieldPath=".delegatedFrom"
type ResourceGrantSpec struct {
	// ConsumerRef is the consumer that receives the allowances.
	ConsumerRef ConsumerRef `json:"consumerRef"`

	// Allowances are the amounts granted, per resource type.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=map
	// +listMapKey=resourceType
	Allowances []Allowance `json:"allowances"`

	// DelegatedFrom makes this a delegated allowance: its amounts are handed
	// out of the named parent consumer's cap by the parent's admin, and the
	// manager's webhook admits a create or a raise only if the parent's
	// hand-outs still fit its cap. Absent: a platform grant, which only the
	// platform's quota admins may write. Immutable.
	// +optional
	DelegatedFrom *DelegatedFrom `json:"delegatedFrom,omitempty"`
}

// Allowance grants amounts of one resource type.
type Allowance struct {
	// ResourceType names an active ResourceRegistration's resourceType.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ResourceType string `json:"resourceType"`

	// Buckets are the amounts granted, each for the dimensions its selector matches.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	Buckets []GrantBucket `json:"buckets"`
}

// GrantBucket is an amount granted to every bucket whose dimensions match the selector.
type GrantBucket struct {
	// Amount in the registration's base unit.
	// +kubebuilder:validation:Minimum=0
	Amount int64 `json:"amount"`

	// DimensionSelector selects the bucket dimensions this amount applies to;
	// empty or absent selects every bucket of the resource type.
	// +optional
	DimensionSelector *metav1.LabelSelector `json:"dimensionSelector,omitempty"`
}

// ResourceGrantStatus reports whether the grant counts toward limits.
type ResourceGrantStatus struct {
	// ObservedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Active.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ResourceGrant gives a consumer quota. Grants for the same consumer and resource type add up.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +genclient
// +kubebuilder:resource:shortName=rgrant,categories=quotakeeper
// +kubebuilder:printcolumn:name="Consumer Kind",type=string,JSONPath=`.spec.consumerRef.kind`
// +kubebuilder:printcolumn:name="Consumer",type=string,JSONPath=`.spec.consumerRef.name`
// +kubebuilder:printcolumn:name="Delegated From",type=string,JSONPath=`.spec.delegatedFrom.consumerRef.name`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.conditions[?(@.type=="Active")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ResourceGrant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ResourceGrantSpec   `json:"spec"`
	Status ResourceGrantStatus `json:"status,omitempty"`
}

// ResourceGrantList is a list of ResourceGrants.
// +kubebuilder:object:root=true
type ResourceGrantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceGrant `json:"items"`
}

func init() {
	register(&ResourceGrant{}, &ResourceGrantList{})
}
