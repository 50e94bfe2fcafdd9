package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// RegistrationType says how claims of a resource type are enforced.
// +kubebuilder:validation:Enum=Entity;Allocation;Feature
type RegistrationType string

const (
	// RegistrationTypeEntity counts objects, enforced synchronously at admission.
	RegistrationTypeEntity RegistrationType = "Entity"
	// RegistrationTypeAllocation counts amounts that owning services claim asynchronously.
	RegistrationTypeAllocation RegistrationType = "Allocation"
	// RegistrationTypeFeature is reserved for feature flags.
	RegistrationTypeFeature RegistrationType = "Feature"
)

// ResourceRegistrationSpec declares a quotable resource type.
type ResourceRegistrationSpec struct {
	// ConsumerTypeRef is the kind of object that consumes this resource type.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.consumerTypeRef is immutable"
	ConsumerTypeRef ConsumerTypeRef `json:"consumerTypeRef"`

	// Type is how claims are enforced: Entity, Allocation or Feature.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.type is immutable"
	Type RegistrationType `json:"type"`

	// ResourceType is the fully qualified name of the resource type, such as
	// resourcemanager.miloapis.com/projects.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.resourceType is immutable"
	ResourceType string `json:"resourceType"`

	// Description says what the quota limits, for people.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Description string `json:"description,omitempty"`

	// BaseUnit is the unit amounts are counted in, such as "millicores".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	BaseUnit string `json:"baseUnit"`

	// DisplayUnit is the unit shown to people, such as "cores".
	// +kubebuilder:validation:MaxLength=64
	// +optional
	DisplayUnit string `json:"displayUnit,omitempty"`

	// UnitConversionFactor is how many base units make one display unit.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	UnitConversionFactor int64 `json:"unitConversionFactor,omitempty"`

	// Dimensions are the label keys that grants may select on and claims may set.
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +optional
	Dimensions []string `json:"dimensions,omitempty"`

	// ClaimingResources are the kinds whose creation claims this resource type.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=map
	// +listMapKey=apiGroup
	// +listMapKey=kind
	ClaimingResources []GroupKind `json:"claimingResources"`
}

// ResourceRegistrationStatus reports whether the registration is in use.
type ResourceRegistrationStatus struct {
	// ObservedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Active.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ResourceRegistration declares a resource type that quota can be granted and claimed for.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:resource:scope=Cluster,shortName=rreg,categories=quotakeeper
// +kubebuilder:printcolumn:name="Resource Type",type=string,JSONPath=`.spec.resourceType`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.conditions[?(@.type=="Active")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ResourceRegistration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ResourceRegistrationSpec   `json:"spec"`
	Status ResourceRegistrationStatus `json:"status,omitempty"`
}

// ResourceRegistrationList is a list of ResourceRegistrations.
// +kubebuilder:object:root=true
type ResourceRegistrationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceRegistration `json:"items"`
}

func init() {
	register(&ResourceRegistration{}, &ResourceRegistrationList{})
}
