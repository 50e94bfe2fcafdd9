package webhooks

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/validation"
)

// +kubebuilder:webhook:path=/validate-quota-miloapis-com-v1alpha1-resourceclaim,mutating=false,failurePolicy=fail,sideEffects=None,groups=quota.miloapis.com,resources=resourceclaims,verbs=create;update,versions=v1alpha1,name=vresourceclaim.quota.miloapis.com,timeoutSeconds=5,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/mutate-quota-miloapis-com-v1alpha1-resourceclaim,mutating=true,failurePolicy=fail,sideEffects=None,groups=quota.miloapis.com,resources=resourceclaims,verbs=create;update,versions=v1alpha1,name=mresourceclaim.quota.miloapis.com,timeoutSeconds=5,admissionReviewVersions=v1

// ClaimValidator keeps claims honest: a claim is judged against the
// registrations and its namespace, whoever creates it.
type ClaimValidator struct {
	Reader          client.Reader
	SystemNamespace string
}

var _ admission.Validator[*quotav1alpha1.ResourceClaim] = (*ClaimValidator)(nil)

func (v *ClaimValidator) ValidateCreate(ctx context.Context, c *quotav1alpha1.ResourceClaim) (admission.Warnings, error) {
	cat, err := validation.LoadCatalog(ctx, v.Reader)
	if err != nil {
		return nil, err
	}
	ns, err := validation.GetNamespace(ctx, v.Reader, c.Namespace)
	if err != nil {
		return nil, err
	}
	verdict := validation.ValidateClaim(c, cat, ns, v.SystemNamespace)
	if len(verdict.Errors) > 0 {
		return nil, invalidClaim(c, verdict.Errors)
	}
	return verdict.Pending, nil
}

// ValidateUpdate judges only the view label: the spec is immutable (the
// CRD says so), and metadata updates such as removing the finalizer must
// pass. A claim cannot become a view (which would stop it counting) or
// stop being one.
func (v *ClaimValidator) ValidateUpdate(_ context.Context, old, c *quotav1alpha1.ResourceClaim) (admission.Warnings, error) {
	if quotav1alpha1.IsView(old.Labels) != quotav1alpha1.IsView(c.Labels) {
		path := field.NewPath("metadata", "labels").Key(quotav1alpha1.ViewLabel)
		return nil, invalidClaim(c, field.ErrorList{field.Forbidden(path,
			"marks a claim the observer writes as a view of what an object counts; it is set at creation and cannot be added, removed or changed")})
	}
	return nil, nil
}

func (v *ClaimValidator) ValidateDelete(context.Context, *quotav1alpha1.ResourceClaim) (admission.Warnings, error) {
	return nil, nil
}

func invalidClaim(c *quotav1alpha1.ResourceClaim, errs field.ErrorList) error {
	return apierrors.NewInvalid(quotav1alpha1.GroupVersion.WithKind("ResourceClaim").GroupKind(), c.Name, errs)
}

// ClaimFinalizer adds v1alpha1.ClaimFinalizer to every live claim, so the
// claim controller returns its amount before the claim goes away. Adding it
// on update too puts it back if someone strips it from a live claim. Views
// hold nothing to return and the claim controller leaves them alone, so
// they get none.
type ClaimFinalizer struct{}

var _ admission.Defaulter[*quotav1alpha1.ResourceClaim] = ClaimFinalizer{}

func (ClaimFinalizer) Default(_ context.Context, c *quotav1alpha1.ResourceClaim) error {
	if c.DeletionTimestamp == nil && !quotav1alpha1.IsView(c.Labels) {
		controllerutil.AddFinalizer(c, quotav1alpha1.ClaimFinalizer)
	}
	return nil
}
