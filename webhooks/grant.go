package webhooks

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/validation"
)

// +kubebuilder:webhook:path=/validate-quota-miloapis-com-v1alpha1-resourcegrant,mutating=false,failurePolicy=fail,sideEffects=None,groups=quota.miloapis.com,resources=resourcegrants,verbs=create;update,versions=v1alpha1,name=vresourcegrant.quota.miloapis.com,timeoutSeconds=5,admissionReviewVersions=v1

// GrantValidator rejects grants the grant controller would mark
// ValidationFailed, so an administrator learns at once, field by field.
type GrantValidator struct {
	Reader          client.Reader
	SystemNamespace string
}

var _ admission.Validator[*quotav1alpha1.ResourceGrant] = (*GrantValidator)(nil)

func (v *GrantValidator) ValidateCreate(ctx context.Context, g *quotav1alpha1.ResourceGrant) (admission.Warnings, error) {
	return v.validate(ctx, g)
}

// ValidateUpdate judges only spec changes: a grant whose registration went
// away must still accept label edits and finalizer removal.
func (v *GrantValidator) ValidateUpdate(ctx context.Context, old, g *quotav1alpha1.ResourceGrant) (admission.Warnings, error) {
	if apiequality.Semantic.DeepEqual(old.Spec, g.Spec) {
		return nil, nil
	}
	return v.validate(ctx, g)
}

func (v *GrantValidator) ValidateDelete(context.Context, *quotav1alpha1.ResourceGrant) (admission.Warnings, error) {
	return nil, nil
}

func (v *GrantValidator) validate(ctx context.Context, g *quotav1alpha1.ResourceGrant) (admission.Warnings, error) {
	cat, err := validation.LoadCatalog(ctx, v.Reader)
	if err != nil {
		return nil, err
	}
	verdict := validation.ValidateGrant(g, cat, v.SystemNamespace)
	var others quotav1alpha1.ResourceGrantList
	if err := v.Reader.List(ctx, &others, client.InNamespace(g.Namespace)); err != nil {
		return nil, err
	}
	verdict.Errors = append(verdict.Errors, validation.ValidateGrantTotals(g, others.Items)...)
	if len(verdict.Errors) > 0 {
		return nil, apierrors.NewInvalid(quotav1alpha1.GroupVersion.WithKind("ResourceGrant").GroupKind(), g.Name, verdict.Errors)
	}
	return verdict.Pending, nil
}
