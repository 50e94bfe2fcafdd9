package usage

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// Units reads every active ResourceRegistration's units, by resource type
// (an inactive second registration of a type may declare other units).
// Registrations are cluster-scoped and a tenant may not be allowed to read
// them: then the map is empty rather than the command failing, and the
// units come from the namespace's EffectiveResourceGrants, which carry a
// copy (NamespaceRows).
func Units(ctx context.Context, c client.Client) (map[string]quotav1alpha1.Units, error) {
	var regs quotav1alpha1.ResourceRegistrationList
	if err := c.List(ctx, &regs); err != nil {
		if apierrors.IsForbidden(err) {
			return map[string]quotav1alpha1.Units{}, nil
		}
		return nil, err
	}
	out := map[string]quotav1alpha1.Units{}
	for i := range regs.Items {
		r := &regs.Items[i]
		active := meta.IsStatusConditionTrue(r.Status.Conditions, quotav1alpha1.ConditionActive)
		if _, seen := out[r.Spec.ResourceType]; seen && !active {
			continue
		}
		out[r.Spec.ResourceType] = quotav1alpha1.UnitsOf(r)
		// A cap to hand out this type is shown in its units.
		out[quotav1alpha1.DelegatedResourceType(r.Spec.ResourceType)] = quotav1alpha1.UnitsOf(r)
	}
	return out, nil
}
