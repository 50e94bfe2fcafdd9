package webhooks

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/validation"
)

// +kubebuilder:webhook:path=/validate-quota-miloapis-com-v1alpha1-resourceregistration,mutating=false,failurePolicy=fail,sideEffects=None,groups=quota.miloapis.com,resources=resourceregistrations,verbs=create;update,versions=v1alpha1,name=vresourceregistration.quota.miloapis.com,admissionReviewVersions=v1

// RegistrationValidator checks a registration's dimensions. Duplicate
// resource types are not refused here: the registration controller marks
// the later one AlreadyRegistered, which also covers two created at once.
type RegistrationValidator struct{}

var _ admission.Validator[*quotav1alpha1.ResourceRegistration] = RegistrationValidator{}

func (RegistrationValidator) ValidateCreate(_ context.Context, r *quotav1alpha1.ResourceRegistration) (admission.Warnings, error) {
	return nil, invalidRegistration(r)
}

func (RegistrationValidator) ValidateUpdate(_ context.Context, old, r *quotav1alpha1.ResourceRegistration) (admission.Warnings, error) {
	if apiequality.Semantic.DeepEqual(old.Spec.Dimensions, r.Spec.Dimensions) {
		return nil, nil
	}
	return nil, invalidRegistration(r)
}

func (RegistrationValidator) ValidateDelete(context.Context, *quotav1alpha1.ResourceRegistration) (admission.Warnings, error) {
	return nil, nil
}

func invalidRegistration(r *quotav1alpha1.ResourceRegistration) error {
	if errs := validation.ValidateRegistration(r); len(errs) > 0 {
		return apierrors.NewInvalid(quotav1alpha1.GroupVersion.WithKind("ResourceRegistration").GroupKind(), r.Name, errs)
	}
	return nil
}
