package v1alpha1

// ConsumerTypeRef names the kind of object that consumes a resource type,
// such as resourcemanager.miloapis.com/Organization or the core Namespace.
type ConsumerTypeRef struct {
	// APIGroup of the consumer kind; empty for the core group.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the consumer.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
}

// ConsumerRef names one consumer: the object whose quota is counted.
type ConsumerRef struct {
	// APIGroup of the consumer; empty for the core group.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the consumer.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Name of the consumer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace of the consumer, for namespaced consumer kinds.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// GroupKind names a kind of Kubernetes object.
type GroupKind struct {
	// APIGroup of the kind; empty for the core group.
	// +kubebuilder:default=""
	// +optional
	APIGroup string `json:"apiGroup"`
	// Kind, in CamelCase.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
}

// ObjectRef names one Kubernetes object, down to its UID.
type ObjectRef struct {
	// APIGroup of the object; empty for the core group.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the object.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Namespace of the object; empty for cluster-scoped objects.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	// +optional
	Name string `json:"name,omitempty"`
	// UID of the object.
	// +optional
	UID string `json:"uid,omitempty"`
}

// Condition types and reasons shared by the kinds of this package.
const (
	// ConditionActive is set on registrations and grants that take part in quota decisions.
	ConditionActive = "Active"
	// ConditionGranted is set on claims once they are decided.
	ConditionGranted = "Granted"
	// ConditionReady is set on creation policies that are loaded and in use.
	ConditionReady = "Ready"
	// ConditionOverLimit is set on buckets whose allocation exceeds a lowered limit.
	ConditionOverLimit = "OverLimit"

	ReasonRegistrationActive = "RegistrationActive"
	ReasonAlreadyRegistered  = "AlreadyRegistered"
	ReasonGrantActive        = "GrantActive"
	ReasonValidationFailed   = "ValidationFailed"
	// ReasonLimitOverflow: a grant is not made active because, with the
	// other grants of its consumer that count, its amounts would sum past
	// int64 and the ledger could compute no limit.
	ReasonLimitOverflow     = "LimitOverflow"
	ReasonQuotaAvailable    = "QuotaAvailable"
	ReasonQuotaExceeded     = "QuotaExceeded"
	ReasonPendingEvaluation = "PendingEvaluation"
	ReasonWithinLimit       = "WithinLimit"
	ReasonLimitLowered      = "LimitLowered"
	ReasonPolicyReady       = "PolicyReady"
	ReasonPolicyDisabled    = "PolicyDisabled"
)
