package builders

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// BypassWrapper builds a QuotaBypass.
type BypassWrapper struct{ quotav1alpha1.QuotaBypass }

// Bypass starts a QuotaBypass named name, for reason, lasting d.
func Bypass(name, reason string, d time.Duration) *BypassWrapper {
	return &BypassWrapper{quotav1alpha1.QuotaBypass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       quotav1alpha1.QuotaBypassSpec{Reason: reason, Duration: metav1.Duration{Duration: d}},
	}}
}

// Obj returns the bypass.
func (w *BypassWrapper) Obj() *quotav1alpha1.QuotaBypass { return &w.QuotaBypass }

// Constraint adds the constraint of kind named name ("*": every one of the
// kind) to those the bypass relaxes.
func (w *BypassWrapper) Constraint(kind, name string) *BypassWrapper {
	return w.Constraints(quotav1alpha1.BypassedConstraint{Kind: kind, Name: name})
}

// Constraints adds constraints as given.
func (w *BypassWrapper) Constraints(cs ...quotav1alpha1.BypassedConstraint) *BypassWrapper {
	w.Spec.Constraints = append(w.Spec.Constraints, cs...)
	return w
}
