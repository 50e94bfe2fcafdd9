package grants

import (
	"fmt"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/ledger"
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
	consumer := ledger.Consumer{
		APIGroup:  g.Spec.ConsumerRef.APIGroup,
		Kind:      g.Spec.ConsumerRef.Kind,
		Name:      g.Spec.ConsumerRef.Name,
		Namespace: g.Spec.ConsumerRef.Namespace,
	}
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

// CheckRegistered reports what makes a grant unusable under the given
// registrations (keyed by spec.resourceType): an allowance for an
// unregistered resource type, a consumer of another kind than the
// registration's consumerTypeRef, or a selector on a dimension the
// registration does not declare.
func CheckRegistered(g *v1alpha1.ResourceGrant, registrations map[string]*v1alpha1.ResourceRegistration) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	c := g.Spec.ConsumerRef
	for i, a := range g.Spec.Allowances {
		aPath := spec.Child("allowances").Index(i)
		reg, ok := registrations[a.ResourceType]
		if !ok {
			errs = append(errs, field.NotFound(aPath.Child("resourceType"), a.ResourceType))
			continue
		}
		want := reg.Spec.ConsumerTypeRef
		if c.APIGroup != want.APIGroup || c.Kind != want.Kind {
			errs = append(errs, field.Invalid(spec.Child("consumerRef"), fmt.Sprintf("%s/%s", c.APIGroup, c.Kind),
				fmt.Sprintf("resource type %s is consumed by %s/%s (ResourceRegistration %s)", a.ResourceType, want.APIGroup, want.Kind, reg.Name)))
		}
		for j, b := range a.Buckets {
			if b.DimensionSelector == nil {
				continue
			}
			selPath := aPath.Child("buckets").Index(j).Child("dimensionSelector")
			for _, k := range slices.Sorted(maps.Keys(b.DimensionSelector.MatchLabels)) {
				if !slices.Contains(reg.Spec.Dimensions, k) {
					errs = append(errs, field.NotSupported(selPath.Child("matchLabels").Key(k), k, reg.Spec.Dimensions))
				}
			}
			for n, e := range b.DimensionSelector.MatchExpressions {
				if !slices.Contains(reg.Spec.Dimensions, e.Key) {
					errs = append(errs, field.NotSupported(selPath.Child("matchExpressions").Index(n).Child("key"), e.Key, reg.Spec.Dimensions))
				}
			}
		}
	}
	return errs
}
