package webhooks

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/validation"
)

// +kubebuilder:webhook:path=/validate-quota-miloapis-com-v1alpha1-resourceregistration,mutating=false,failurePolicy=fail,sideEffects=None,groups=quota.miloapis.com,resources=resourceregistrations,verbs=create;update,versions=v1alpha1,name=vresourceregistration.quota.miloapis.com,timeoutSeconds=5,admissionReviewVersions=v1

// RegistrationValidator checks a registration's dimensions, and refuses to
// create a second registration of a resource type an active one already
// declares (as Milo does). That check sees the registrations of the
// moment: two created at once both pass, and the registration controller
// marks the later one AlreadyRegistered, the backstop for that race.
type RegistrationValidator struct {
	Reader client.Reader
}

var _ admission.Validator[*quotav1alpha1.ResourceRegistration] = RegistrationValidator{}

func (v RegistrationValidator) ValidateCreate(ctx context.Context, r *quotav1alpha1.ResourceRegistration) (admission.Warnings, error) {
	errs := validation.ValidateRegistration(r)
	cat, err := validation.LoadCatalog(ctx, v.Reader)
	if err != nil {
		return nil, err
	}
	if active, state := cat.Lookup(r.Spec.ResourceType); state == validation.Active && active.Name != r.Name {
		errs = append(errs, field.Invalid(field.NewPath("spec", "resourceType"), r.Spec.ResourceType, "already registered by "+active.Name))
	}
	return nil, invalidRegistration(r, errs)
}

func (RegistrationValidator) ValidateUpdate(_ context.Context, old, r *quotav1alpha1.ResourceRegistration) (admission.Warnings, error) {
	if apiequality.Semantic.DeepEqual(old.Spec.Dimensions, r.Spec.Dimensions) {
		return nil, nil
	}
	return nil, invalidRegistration(r, validation.ValidateRegistration(r))
}

func (RegistrationValidator) ValidateDelete(context.Context, *quotav1alpha1.ResourceRegistration) (admission.Warnings, error) {
	return nil, nil
}

func invalidRegistration(r *quotav1alpha1.ResourceRegistration, errs field.ErrorList) error {
	if len(errs) > 0 {
		return apierrors.NewInvalid(quotav1alpha1.GroupVersion.WithKind("ResourceRegistration").GroupKind(), r.Name, errs)
	}
	return nil
}
