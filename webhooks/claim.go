package webhooks

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/validation"
)

// +kubebuilder:webhook:path=/validate-quota-miloapis-com-v1alpha1-resourceclaim,mutating=false,failurePolicy=fail,sideEffects=None,groups=quota.miloapis.com,resources=resourceclaims,verbs=create;update,versions=v1alpha1,name=vresourceclaim.quota.miloapis.com,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/mutate-quota-miloapis-com-v1alpha1-resourceclaim,mutating=true,failurePolicy=fail,sideEffects=None,groups=quota.miloapis.com,resources=resourceclaims,verbs=create;update,versions=v1alpha1,name=mresourceclaim.quota.miloapis.com,admissionReviewVersions=v1

var reservationIDPath = field.NewPath("metadata", "annotations").Key(quotav1alpha1.ReservationIDAnnotation)

// ClaimValidator keeps claims honest. Beyond the registration rules it
// guards the reservation-id annotation: a claim with it releases that
// ledger id when deleted, so a tenant who could set it could release the
// allocation of an object that still exists and take the quota twice. Only
// the manager, which creates claims from admission reservations, may set it,
// and nobody may change it.
type ClaimValidator struct {
	Reader          client.Reader
	SystemNamespace string
	// ManagerUsername is the quotakeeper manager's own user name (see
	// WhoAmI). The claims it makes with the annotation are records of
	// reservations the ledger already holds, so they skip the registration
	// and namespace checks; any other claim is judged whoever creates it.
	ManagerUsername string
}

var _ admission.Validator[*quotav1alpha1.ResourceClaim] = (*ClaimValidator)(nil)

func (v *ClaimValidator) ValidateCreate(ctx context.Context, c *quotav1alpha1.ResourceClaim) (admission.Warnings, error) {
	if _, ok := c.Annotations[quotav1alpha1.ReservationIDAnnotation]; ok {
		if v.ManagerUsername == "" || requester(ctx) != v.ManagerUsername {
			return nil, invalidClaim(c, field.ErrorList{field.Forbidden(reservationIDPath,
				"only the quotakeeper manager sets this annotation, on the claims it creates from admission reservations")})
		}
		// A record of a reservation the ledger already holds: judging it
		// again could only strand the reservation, never undo it.
		return nil, nil
	}
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

// ValidateUpdate only guards the annotation: the spec is immutable (the CRD
// says so), and metadata updates such as removing the finalizer must pass.
func (v *ClaimValidator) ValidateUpdate(_ context.Context, old, c *quotav1alpha1.ResourceClaim) (admission.Warnings, error) {
	was, hadIt := old.Annotations[quotav1alpha1.ReservationIDAnnotation]
	is, hasIt := c.Annotations[quotav1alpha1.ReservationIDAnnotation]
	if was != is || hadIt != hasIt {
		return nil, invalidClaim(c, field.ErrorList{field.Forbidden(reservationIDPath,
			fmt.Sprintf("may not be changed (was %q)", was))})
	}
	return nil, nil
}

func (v *ClaimValidator) ValidateDelete(context.Context, *quotav1alpha1.ResourceClaim) (admission.Warnings, error) {
	return nil, nil
}

func invalidClaim(c *quotav1alpha1.ResourceClaim, errs field.ErrorList) error {
	return apierrors.NewInvalid(quotav1alpha1.GroupVersion.WithKind("ResourceClaim").GroupKind(), c.Name, errs)
}

// requester is the user name of the admission request in ctx.
func requester(ctx context.Context) string {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return ""
	}
	return req.UserInfo.Username
}

// ClaimFinalizer adds v1alpha1.ClaimFinalizer to every live claim, so the
// claim controller returns its amount before the claim goes away. Adding it
// on update too puts it back if someone strips it from a live claim.
type ClaimFinalizer struct{}

var _ admission.Defaulter[*quotav1alpha1.ResourceClaim] = ClaimFinalizer{}

func (ClaimFinalizer) Default(_ context.Context, c *quotav1alpha1.ResourceClaim) error {
	if c.DeletionTimestamp == nil {
		controllerutil.AddFinalizer(c, quotav1alpha1.ClaimFinalizer)
	}
	return nil
}
