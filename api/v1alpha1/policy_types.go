package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TriggerResource names the kind whose objects trigger a policy.
type TriggerResource struct {
	// APIVersion of the kind, such as resourcemanager.miloapis.com/v1alpha1.
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`
	// Kind of the triggering objects.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
}

// TriggerCondition is a CEL expression over the triggering object; all must be true.
type TriggerCondition struct {
	// Expression is a CEL expression that returns a bool.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`
	// Message is shown when the condition is false.
	// +optional
	Message string `json:"message,omitempty"`
}

// PolicyTrigger says which objects a policy applies to.
type PolicyTrigger struct {
	// Resource is the kind of triggering object.
	Resource TriggerResource `json:"resource"`
	// Conditions must all hold for the policy to apply.
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	Conditions []TriggerCondition `json:"conditions,omitempty"`
}

// PolicyStatus reports whether a creation policy is valid and in use.
type PolicyStatus struct {
	// ObservedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GrantCreationPolicySpec creates a grant for every triggering object.
type GrantCreationPolicySpec struct {
	// Trigger selects the objects that receive a grant.
	Trigger PolicyTrigger `json:"trigger"`
	// Target is the grant to create.
	Target GrantTarget `json:"target"`
	// Disabled stops the policy without deleting it.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
}

// GrantTarget holds the template of the grant to create.
type GrantTarget struct {
	// ResourceGrantTemplate is rendered with the triggering object as .trigger.
	ResourceGrantTemplate ResourceGrantTemplate `json:"resourceGrantTemplate"`
}

// ResourceGrantTemplate is a ResourceGrant whose string fields may hold Go templates.
type ResourceGrantTemplate struct {
	// Metadata for the created grant: name, namespace, labels, annotations.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	Metadata runtime.RawExtension `json:"metadata,omitempty"`
	// Spec of the created grant.
	Spec ResourceGrantSpec `json:"spec"`
}

// GrantCreationPolicy creates ResourceGrants when objects of a kind appear.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=gcp,categories=quotakeeper
// +kubebuilder:printcolumn:name="Trigger",type=string,JSONPath=`.spec.trigger.resource.kind`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
type GrantCreationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GrantCreationPolicySpec `json:"spec"`
	Status PolicyStatus            `json:"status,omitempty"`
}

// GrantCreationPolicyList is a list of GrantCreationPolicies.
// +kubebuilder:object:root=true
type GrantCreationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GrantCreationPolicy `json:"items"`
}

// ClaimCreationPolicySpec claims quota for every triggering object at admission.
type ClaimCreationPolicySpec struct {
	// Trigger selects the objects that claim quota.
	Trigger PolicyTrigger `json:"trigger"`
	// Target is the claim to make.
	Target ClaimTarget `json:"target"`
	// Disabled stops the policy without deleting it.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
}

// ClaimTarget holds the template of the claim to make.
type ClaimTarget struct {
	// ResourceClaimTemplate is rendered with the triggering object as .trigger.
	ResourceClaimTemplate ResourceClaimTemplate `json:"resourceClaimTemplate"`
}

// ResourceClaimTemplate is a ResourceClaim whose string fields may hold Go templates.
type ResourceClaimTemplate struct {
	// Metadata for the created claim: name, namespace, labels, annotations.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	Metadata runtime.RawExtension `json:"metadata,omitempty"`
	// Spec of the created claim.
	Spec ResourceClaimSpec `json:"spec"`
}

// ClaimCreationPolicy claims quota at admission when objects of a kind are created.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ccp,categories=quotakeeper
// +kubebuilder:printcolumn:name="Trigger",type=string,JSONPath=`.spec.trigger.resource.kind`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
type ClaimCreationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClaimCreationPolicySpec `json:"spec"`
	Status PolicyStatus            `json:"status,omitempty"`
}

// ClaimCreationPolicyList is a list of ClaimCreationPolicies.
// +kubebuilder:object:root=true
type ClaimCreationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClaimCreationPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&GrantCreationPolicy{}, &GrantCreationPolicyList{}, &ClaimCreationPolicy{}, &ClaimCreationPolicyList{})
}
