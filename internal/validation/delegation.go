package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

var delegatedFromPath = field.NewPath("spec", "delegatedFrom", "consumerRef")

// ValidateDelegation judges what a delegated grant (spec.delegatedFrom set)
// must be besides an ordinary grant: it draws from a parent other than its
// own consumer, it lives in a namespace that belongs to that parent (so an
// organization's admin hands its cap out to its own namespaces only, and
// RBAC on those namespaces decides who may), and its amounts select no
// dimensions (a cap is handed out as a whole amount of the resource type;
// the parent's delegation bucket has no dimensions to match). ns is the
// grant's namespace, nil if it cannot be found. A platform grant passes.
func ValidateDelegation(g *quotav1alpha1.ResourceGrant, ns *corev1.Namespace) field.ErrorList {
	if !g.IsDelegated() {
		return nil
	}
	var errs field.ErrorList
	parent := g.Spec.DelegatedFrom.ConsumerRef
	if parent.Kind == "" {
		errs = append(errs, field.Required(delegatedFromPath.Child("kind"), ""))
	}
	if parent.Name == "" {
		errs = append(errs, field.Required(delegatedFromPath.Child("name"), ""))
	}
	if parent == g.Spec.ConsumerRef {
		errs = append(errs, field.Invalid(delegatedFromPath, consumerString(parent), "a consumer cannot hand its own cap to itself"))
	}
	var labels map[string]string
	if ns != nil {
		labels = ns.Labels
	}
	if parent.Kind != "" && parent.Name != "" && !quotav1alpha1.NamespaceBelongsTo(g.Namespace, labels, parent) {
		errs = append(errs, field.Forbidden(delegatedFromPath, fmt.Sprintf(
			"namespace %q does not belong to %s (it has no label %s=%s): a cap is handed out only to its own namespaces",
			g.Namespace, consumerString(parent), quotav1alpha1.ConsumerLabelKey(parent.APIGroup, parent.Kind), parent.Name)))
	}
	for i, a := range g.Spec.Allowances {
		for j, b := range a.Buckets {
			if s := b.DimensionSelector; s != nil && len(s.MatchLabels)+len(s.MatchExpressions) > 0 {
				errs = append(errs, field.Forbidden(field.NewPath("spec", "allowances").Index(i).Child("buckets").Index(j).Child("dimensionSelector"),
					"a delegated amount applies to every bucket of its resource type: a parent's cap is handed out without dimensions"))
			}
		}
	}
	return errs
}

// validateCap judges an allowance of a delegation resource type
// ("delegated/<base>"): a cap its consumer's admin may hand out to the
// consumer's children as base. base must be an active registered type (its
// consumer kind is the children's, not this consumer's); the cap is one
// amount of the whole resource type (no dimensions: the delegation bucket
// has none to match); and only a platform grant gives one, since a
// delegated grant that handed out a cap would let an admin raise a cap of
// its own.
func validateCap(g *quotav1alpha1.ResourceGrant, cat *Catalog, base string, a quotav1alpha1.Allowance, path *field.Path) field.ErrorList {
	var v Verdict
	v.registration(cat, base, path.Child("resourceType"), nil, nil)
	errs := v.Errors
	if g.IsDelegated() {
		errs = append(errs, field.Forbidden(path.Child("resourceType"), "a delegated grant hands out amounts, not caps: only a platform grant gives a cap to hand out"))
	}
	for j, b := range a.Buckets {
		if s := b.DimensionSelector; s != nil && len(s.MatchLabels)+len(s.MatchExpressions) > 0 {
			errs = append(errs, field.Forbidden(path.Child("buckets").Index(j).Child("dimensionSelector"),
				"a cap to hand out applies to the whole resource type: it selects no dimensions"))
		}
	}
	return errs
}
