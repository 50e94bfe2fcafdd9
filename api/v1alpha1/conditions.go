package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A condition says something about one generation of its object's spec: a
// controller that has not yet looked at the latest spec leaves the old
// condition in place. These helpers answer for the current generation only,
// so that nobody acts on a verdict about a spec that is gone.

// CurrentCondition returns the condition of type t if it describes
// generation, else nil.
func CurrentCondition(conds []metav1.Condition, t string, generation int64) *metav1.Condition {
	c := meta.FindStatusCondition(conds, t)
	if c == nil || c.ObservedGeneration != generation {
		return nil
	}
	return c
}

// IsCurrent reports whether a condition of type t describes generation.
func IsCurrent(conds []metav1.Condition, t string, generation int64) bool {
	return CurrentCondition(conds, t, generation) != nil
}

// IsTrue reports whether the condition of type t is True for generation.
func IsTrue(conds []metav1.Condition, t string, generation int64) bool {
	c := CurrentCondition(conds, t, generation)
	return c != nil && c.Status == metav1.ConditionTrue
}

// IsFalse reports whether the condition of type t is False for generation.
func IsFalse(conds []metav1.Condition, t string, generation int64) bool {
	c := CurrentCondition(conds, t, generation)
	return c != nil && c.Status == metav1.ConditionFalse
}

// ConditionGetter is one of our objects whose status holds conditions, as
// Cluster API's util/conditions Getter: code and tests that wait for or read
// a condition take one of these instead of switching over kinds to reach
// Status.Conditions. It is a controller-runtime client.Object (spelt out here
// so that the API package needs apimachinery only).
// +kubebuilder:object:generate=false
type ConditionGetter interface {
	metav1.Object
	runtime.Object
	// GetConditions returns the status conditions (the slice itself, not a
	// copy).
	GetConditions() []metav1.Condition
}

// ConditionSetter is a ConditionGetter whose conditions can be replaced, as
// Cluster API's util/conditions Setter. Writers usually change one condition
// with SetCondition.
// +kubebuilder:object:generate=false
type ConditionSetter interface {
	ConditionGetter
	SetConditions([]metav1.Condition)
}

// SetCondition sets cond on obj's status conditions the way
// meta.SetStatusCondition does (LastTransitionTime changes only with the
// status), and reports whether anything changed.
func SetCondition(obj ConditionSetter, cond metav1.Condition) bool {
	conds := obj.GetConditions()
	changed := meta.SetStatusCondition(&conds, cond)
	obj.SetConditions(conds)
	return changed
}

// Every kind with status conditions is a ConditionSetter;
// EffectiveResourceGrant has none (its status is a computed view).
var (
	_ ConditionSetter = &ResourceRegistration{}
	_ ConditionSetter = &ResourceGrant{}
	_ ConditionSetter = &ResourceClaim{}
	_ ConditionSetter = &AllowanceBucket{}
	_ ConditionSetter = &GrantCreationPolicy{}
	_ ConditionSetter = &ClaimCreationPolicy{}
	_ ConditionSetter = &QuotaBypass{}
)

// GetConditions returns the registration's status conditions.
func (r *ResourceRegistration) GetConditions() []metav1.Condition { return r.Status.Conditions }

// SetConditions replaces the registration's status conditions.
func (r *ResourceRegistration) SetConditions(c []metav1.Condition) { r.Status.Conditions = c }

// GetConditions returns the grant's status conditions.
func (g *ResourceGrant) GetConditions() []metav1.Condition { return g.Status.Conditions }

// SetConditions replaces the grant's status conditions.
func (g *ResourceGrant) SetConditions(c []metav1.Condition) { g.Status.Conditions = c }

// GetConditions returns the claim's status conditions.
func (c *ResourceClaim) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the claim's status conditions.
func (c *ResourceClaim) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }

// GetConditions returns the bucket's status conditions.
func (b *AllowanceBucket) GetConditions() []metav1.Condition { return b.Status.Conditions }

// SetConditions replaces the bucket's status conditions.
func (b *AllowanceBucket) SetConditions(c []metav1.Condition) { b.Status.Conditions = c }

// GetConditions returns the policy's status conditions.
func (p *GrantCreationPolicy) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions replaces the policy's status conditions.
func (p *GrantCreationPolicy) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }

// GetConditions returns the policy's status conditions.
func (p *ClaimCreationPolicy) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions replaces the policy's status conditions.
func (p *ClaimCreationPolicy) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }

// GetConditions returns the bypass's status conditions.
func (b *QuotaBypass) GetConditions() []metav1.Condition { return b.Status.Conditions }

// SetConditions replaces the bypass's status conditions.
func (b *QuotaBypass) SetConditions(c []metav1.Condition) { b.Status.Conditions = c }
