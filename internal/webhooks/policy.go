package webhooks

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/celpolicy"
)

// +kubebuilder:webhook:path=/validate-quota-miloapis-com-v1alpha1-grantcreationpolicy,mutating=false,failurePolicy=fail,sideEffects=None,groups=quota.miloapis.com,resources=grantcreationpolicies,verbs=create;update,versions=v1alpha1,name=vgrantcreationpolicy.quota.miloapis.com,timeoutSeconds=5,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-quota-miloapis-com-v1alpha1-claimcreationpolicy,mutating=false,failurePolicy=fail,sideEffects=None,groups=quota.miloapis.com,resources=claimcreationpolicies,verbs=create;update,versions=v1alpha1,name=vclaimcreationpolicy.quota.miloapis.com,timeoutSeconds=5,admissionReviewVersions=v1

// The policy validators refuse a creation policy whose CEL does not
// compile, field by field (package celpolicy compiles it). What depends on
// the cluster (registrations, served kinds) is the policy status
// controller's to report: it changes after the policy is written.
//
// Updates are judged only when the spec changes: a stored policy that no
// longer compiles (written before this webhook) must still accept label
// edits and deletion.

// GrantPolicyValidator validates GrantCreationPolicies.
type GrantPolicyValidator struct{}

var _ admission.Validator[*quotav1alpha1.GrantCreationPolicy] = GrantPolicyValidator{}

func (GrantPolicyValidator) ValidateCreate(_ context.Context, p *quotav1alpha1.GrantCreationPolicy) (admission.Warnings, error) {
	var errs field.ErrorList
	// The grants the policy creates carry its name as a label value; a
	// name that cannot be one would make every grant fail.
	for _, msg := range validation.IsValidLabelValue(p.Name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), p.Name,
			msg+" (the name is the "+quotav1alpha1.LabelPolicy+" label of the policy's grants)"))
	}
	_, compileErrs := celpolicy.CompileGrantPolicy(p)
	return nil, invalidPolicy("GrantCreationPolicy", p.Name, append(errs, compileErrs...))
}

func (v GrantPolicyValidator) ValidateUpdate(ctx context.Context, old, p *quotav1alpha1.GrantCreationPolicy) (admission.Warnings, error) {
	if apiequality.Semantic.DeepEqual(old.Spec, p.Spec) {
		return nil, nil
	}
	return v.ValidateCreate(ctx, p)
}

func (GrantPolicyValidator) ValidateDelete(context.Context, *quotav1alpha1.GrantCreationPolicy) (admission.Warnings, error) {
	return nil, nil
}

// ClaimPolicyValidator validates ClaimCreationPolicies.
type ClaimPolicyValidator struct{}

var _ admission.Validator[*quotav1alpha1.ClaimCreationPolicy] = ClaimPolicyValidator{}

func (ClaimPolicyValidator) ValidateCreate(_ context.Context, p *quotav1alpha1.ClaimCreationPolicy) (admission.Warnings, error) {
	_, errs := celpolicy.CompileClaimPolicy(p)
	return nil, invalidPolicy("ClaimCreationPolicy", p.Name, errs)
}

func (v ClaimPolicyValidator) ValidateUpdate(ctx context.Context, old, p *quotav1alpha1.ClaimCreationPolicy) (admission.Warnings, error) {
	if apiequality.Semantic.DeepEqual(old.Spec, p.Spec) {
		return nil, nil
	}
	return v.ValidateCreate(ctx, p)
}

func (ClaimPolicyValidator) ValidateDelete(context.Context, *quotav1alpha1.ClaimCreationPolicy) (admission.Warnings, error) {
	return nil, nil
}

func invalidPolicy(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(quotav1alpha1.GroupVersion.WithKind(kind).GroupKind(), name, errs)
}
