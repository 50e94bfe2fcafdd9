package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
