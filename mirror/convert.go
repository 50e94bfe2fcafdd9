package mirror

import (
	"k8s.io/apimachinery/pkg/api/meta"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// Objects are converted into ledger grants by grants.FromResourceGrant, the
// one conversion the CLI and the controllers share (IDs, selector
// semantics). What the mirror adds is which objects count.

// Evaluated reports whether the grant's Active condition describes its
// current generation: the grant controller has judged this spec.
func Evaluated(obj *quotav1alpha1.ResourceGrant) bool {
	c := meta.FindStatusCondition(obj.Status.Conditions, quotav1alpha1.ConditionActive)
	return c != nil && c.ObservedGeneration == obj.Generation
}

// Active reports whether the grant counts toward limits: Active=True for its
// current generation.
func Active(obj *quotav1alpha1.ResourceGrant) bool {
	return Evaluated(obj) && meta.IsStatusConditionTrue(obj.Status.Conditions, quotav1alpha1.ConditionActive)
}
