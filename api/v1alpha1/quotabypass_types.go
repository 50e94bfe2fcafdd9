package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// QuotaBypass is the break-glass procedure of seed 000: for a limited time
// the quota constraints it names warn instead of deny, so requests over
// quota are admitted (with Gatekeeper's warning) while usage is still
// counted. Only members of the manager's --bypass-groups may create,
// change or delete one; every request that relies on it is recorded as a
// QuotaBypassed Event on it. It is active from its creation for
// spec.duration and ends by itself; deleting it ends it early. The spec
// cannot change after creation.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:resource:scope=Cluster,shortName=qbypass,categories=quotakeeper
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.status.expiresAt`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.conditions[?(@.type=="Active")].status`
type QuotaBypass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   QuotaBypassSpec   `json:"spec"`
	Status QuotaBypassStatus `json:"status,omitempty"`
}

// QuotaBypassSpec says why, for how long and for which constraints quota
// is bypassed.
type QuotaBypassSpec struct {
	// Reason is why quota is bypassed (an incident, a ticket); it is
	// repeated in every QuotaBypassed Event.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`
	// Duration is how long the bypass lasts from its creation: more than
	// zero and at most the manager's --max-bypass-duration (default 1h).
	Duration metav1.Duration `json:"duration"`
	// Constraints are the Gatekeeper quota constraints that warn instead of
	// deny while the bypass is active.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	Constraints []BypassedConstraint `json:"constraints"`
}

// BypassedConstraint names a Gatekeeper constraint (constraints.gatekeeper.sh).
type BypassedConstraint struct {
	// Kind of the constraint: its template's kind, such as QuotaEntity.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Name of the constraint, or "*" for every constraint of the kind.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// QuotaBypassStatus reports when the bypass ends and what it relaxed.
type QuotaBypassStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ExpiresAt is creationTimestamp + spec.duration.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// Relaxed are the constraints the bypass set to warn, with the action
	// each had before (restored when the bypass ends).
	// +listType=atomic
	// +optional
	Relaxed []RelaxedConstraint `json:"relaxed,omitempty"`
	// Conditions: Active (True with reason Active while the bypass lasts;
	// False with reason Expired once it has ended and the constraints are
	// restored).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RelaxedConstraint is a constraint a bypass set to warn.
type RelaxedConstraint struct {
	// Kind of the constraint.
	Kind string `json:"kind"`
	// Name of the constraint.
	Name string `json:"name"`
	// EnforcementAction the constraint had before (deny, or scoped).
	EnforcementAction string `json:"enforcementAction"`
}

// QuotaBypassList is a list of QuotaBypasses.
// +kubebuilder:object:root=true
type QuotaBypassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []QuotaBypass `json:"items"`
}

// Reasons of a QuotaBypass's Active condition.
const (
	ReasonBypassActive  = "Active"
	ReasonBypassExpired = "Expired"
)

// Annotations the manager puts on a constraint it relaxes: the bypass that
// relaxed it and the enforcement action to restore.
const (
	AnnotationBypass            = LabelPrefix + "/bypass"
	AnnotationEnforcementAction = LabelPrefix + "/enforcement-action"
)

// BypassFinalizer keeps a QuotaBypass until the manager has restored the
// constraints it relaxed.
const BypassFinalizer = LabelPrefix + "/bypass-restore"

// ExpiresAt is when the bypass ends: its creation plus its duration, a
// fact of the object alone.
func (b *QuotaBypass) ExpiresAt() time.Time {
	return b.CreationTimestamp.Add(b.Spec.Duration.Duration)
}

// ActiveAt reports whether the bypass is in force at now: created, not
// being deleted, and not expired.
func (b *QuotaBypass) ActiveAt(now time.Time) bool {
	return !b.CreationTimestamp.IsZero() && b.DeletionTimestamp == nil && now.Before(b.ExpiresAt())
}

// Matches reports whether the bypass names the constraint kind/name.
func (b *QuotaBypass) Matches(kind, name string) bool {
	for _, c := range b.Spec.Constraints {
		if c.Kind == kind && (c.Name == name || c.Name == "*") {
			return true
		}
	}
	return false
}

func init() {
	register(&QuotaBypass{}, &QuotaBypassList{})
}
