package grants

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// FromResourceGrant returns the ledger grants a ResourceGrant contributes:
// one per bucket amount, in the order they appear in the object, with IDs
// ledger.GrantID(namespace, name, i) where i counts bucket amounts across all
// allowances (allowances[0].buckets[0] is 0, the next bucket 1, and so on),
// so that every contribution to a limit is traceable to one place in one
// object. The object's generation is carried along for the same reason.
//
// It does not look at status: whether a grant is active is the grant
// controller's decision, made before it hands grants to the ledger. Invalid
// input returns field errors and no grants.
func FromResourceGrant(g *v1alpha1.ResourceGrant) ([]ledger.Grant, error) {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	consumerPath := spec.Child("consumerRef")
	if g.Spec.ConsumerRef.Kind == "" {
		errs = append(errs, field.Required(consumerPath.Child("kind"), ""))
	}
	if g.Spec.ConsumerRef.Name == "" {
		errs = append(errs, field.Required(consumerPath.Child("name"), ""))
	}
	if len(g.Spec.Allowances) == 0 {
		errs = append(errs, field.Required(spec.Child("allowances"), ""))
	}
	consumer := ledgerconv.Consumer(g.Spec.ConsumerRef)
	var out []ledger.Grant
	for i, a := range g.Spec.Allowances {
		aPath := spec.Child("allowances").Index(i)
		if a.ResourceType == "" {
			errs = append(errs, field.Required(aPath.Child("resourceType"), ""))
		}
		if len(a.Buckets) == 0 {
			errs = append(errs, field.Required(aPath.Child("buckets"), ""))
		}
		for j, b := range a.Buckets {
			bPath := aPath.Child("buckets").Index(j)
			if b.Amount < 0 {
				errs = append(errs, field.Invalid(bPath.Child("amount"), b.Amount, "must not be negative"))
			}
			sel, err := selector(b.DimensionSelector)
			if err != nil {
				errs = append(errs, field.Invalid(bPath.Child("dimensionSelector"), b.DimensionSelector, err.Error()))
			}
			out = append(out, ledger.Grant{
				ID:           ledger.GrantID(g.Namespace, g.Name, len(out)),
				Generation:   g.Generation,
				Consumer:     consumer,
				ResourceType: a.ResourceType,
				Amount:       b.Amount,
				Selector:     sel,
			})
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("ResourceGrant %s/%s: %w", g.Namespace, g.Name, errs.ToAggregate())
	}
	return out, nil
}

// selector maps the API's "absent or empty selects every bucket" onto the
// ledger's nil selector. metav1.LabelSelectorAsSelector would turn an absent
// selector into labels.Nothing(), the opposite of what the API promises.
func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil || len(s.MatchLabels)+len(s.MatchExpressions) == 0 {
		return nil, nil
	}
	return metav1.LabelSelectorAsSelector(s)
}
