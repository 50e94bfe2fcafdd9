package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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
	// Expression is a CEL expression that returns a bool. Variables: trigger
	// (the object; GrantCreationPolicy also names it object); user and
	// requestInfo in a ClaimCreationPolicy.
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
	// Conditions: Ready (PolicyReady, or False with ValidationFailed or
	// PolicyDisabled).
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
	// ParentContext names the object the grant is for, by a CEL expression
	// over the trigger. The grant is created only while that object exists,
	// and is owned by it (and by the trigger), so it goes when either goes.
	// The kind must be a cluster-scoped kind the API server serves.
	// +optional
	ParentContext *ParentContext `json:"parentContext,omitempty"`
	// ResourceGrantTemplate is rendered for each triggering object.
	ResourceGrantTemplate ResourceGrantTemplate `json:"resourceGrantTemplate"`
}

// ParentContext names, per trigger, the object a policy's grant belongs to.
// Milo resolves it to another control plane; in a single cluster it is an
// object of this cluster that must exist for the grant to be created.
type ParentContext struct {
	// APIGroup of the parent kind; empty for the core group.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the parent: a cluster-scoped kind the API server serves.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// NameExpression is a CEL expression over the trigger that returns the
	// parent's name, such as trigger.metadata.labels["organization"].
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	NameExpression string `json:"nameExpression"`
}

// ObjectMetaTemplate is the metadata of an object a policy creates. Every
// string value may hold {{ expr }} templates (see ResourceGrantTemplate);
// label and annotation keys are literal.
type ObjectMetaTemplate struct {
	// Name of the created object; empty to use GenerateName.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Name string `json:"name,omitempty"`
	// GenerateName is the prefix of a generated name, used when Name is empty.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	GenerateName string `json:"generateName,omitempty"`
	// Namespace of the created object. Empty: for a grant, the namespace of
	// its consumer's buckets; for a claim, the trigger's namespace.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Labels of the created object.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations of the created object.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ConsumerRefTemplate is a ConsumerRef whose fields may hold {{ expr }}
// templates.
type ConsumerRefTemplate struct {
	// APIGroup of the consumer; empty for the core group.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the consumer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Kind string `json:"kind"`
	// Name of the consumer, such as '{{.trigger.metadata.name}}'.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Name string `json:"name"`
	// Namespace of the consumer, for namespaced consumer kinds.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// ResourceGrantTemplate is the grant a GrantCreationPolicy creates for a
// trigger. A string field is a template when it holds {{ expr }} segments:
// each is a CEL expression that returns a string (the leading-dot form
// {{.trigger.metadata.name}} means trigger.metadata.name), and the rendered
// value replaces it. Label and annotation keys and dimension selectors are
// literal.
type ResourceGrantTemplate struct {
	// Metadata of the created grant.
	// +optional
	Metadata ObjectMetaTemplate `json:"metadata,omitempty"`
	// Spec of the created grant.
	Spec ResourceGrantSpecTemplate `json:"spec"`
}

// ResourceGrantSpecTemplate is a ResourceGrantSpec that may hold templates.
type ResourceGrantSpecTemplate struct {
	// ConsumerRef is the consumer that receives the allowances.
	ConsumerRef ConsumerRefTemplate `json:"consumerRef"`
	// Allowances are the amounts granted, per resource type.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	Allowances []AllowanceTemplate `json:"allowances"`
}

// AllowanceTemplate is an Allowance that may hold templates.
type AllowanceTemplate struct {
	// ResourceType names an active ResourceRegistration's resourceType.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	ResourceType string `json:"resourceType"`
	// Buckets are the amounts granted, each for the dimensions its selector matches.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	Buckets []GrantBucketTemplate `json:"buckets"`
}

// GrantBucketTemplate is a GrantBucket whose amount may be computed.
type GrantBucketTemplate struct {
	// Amount in the registration's base unit: an integer (50); a quantity
	// string ("10Gi", for amounts past the 32-bit range too); or a single
	// {{ expr }} returning an int, a quantity string or a quantity.
	Amount intstr.IntOrString `json:"amount"`
	// DimensionSelector selects the bucket dimensions this amount applies to;
	// empty or absent selects every bucket of the resource type.
	// +optional
	DimensionSelector *metav1.LabelSelector `json:"dimensionSelector,omitempty"`
}

// GrantCreationPolicy creates ResourceGrants when objects of a kind appear.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +genclient
// +genclient:nonNamespaced
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
	// ResourceClaimTemplate is rendered for each triggering object.
	ResourceClaimTemplate ResourceClaimTemplate `json:"resourceClaimTemplate"`
}

// ResourceClaimTemplate is the claim a ClaimCreationPolicy makes for a
// trigger; templates as in ResourceGrantTemplate, with the variables
// trigger, user and requestInfo. The claim's resourceRef is the trigger.
type ResourceClaimTemplate struct {
	// Metadata of the created claim.
	// +optional
	Metadata ObjectMetaTemplate `json:"metadata,omitempty"`
	// Spec of the created claim.
	Spec ResourceClaimSpecTemplate `json:"spec"`
}

// ResourceClaimSpecTemplate is a ResourceClaimSpec that may hold templates.
type ResourceClaimSpecTemplate struct {
	// ConsumerRef is the consumer whose quota is claimed.
	ConsumerRef ConsumerRefTemplate `json:"consumerRef"`
	// Requests are the amounts claimed, one per resource type.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	Requests []ResourceRequestTemplate `json:"requests"`
}

// ResourceRequestTemplate is a ResourceRequest that may hold templates.
type ResourceRequestTemplate struct {
	// ResourceType names an active ResourceRegistration's resourceType.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	ResourceType string `json:"resourceType"`
	// Amount in the registration's base unit, at least 1: an integer, a
	// quantity string, or a single {{ expr }} (see GrantBucketTemplate).
	Amount intstr.IntOrString `json:"amount"`
	// Dimensions place the request in a bucket; keys are literal, values
	// may hold templates.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	Dimensions map[string]string `json:"dimensions,omitempty"`
}

// ClaimCreationPolicy claims quota at admission when objects of a kind are created.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +genclient
// +genclient:nonNamespaced
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
	register(&GrantCreationPolicy{}, &GrantCreationPolicyList{}, &ClaimCreationPolicy{}, &ClaimCreationPolicyList{})
}
