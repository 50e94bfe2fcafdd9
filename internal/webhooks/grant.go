package webhooks

import (
	"context"
	"errors"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/validation"
)

// +kubebuilder:webhook:path=/validate-quota-miloapis-com-v1alpha1-resourcegrant,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=quota.miloapis.com,resources=resourcegrants,verbs=create;update;delete,versions=v1alpha1,name=vresourcegrant.quota.miloapis.com,timeoutSeconds=5,admissionReviewVersions=v1
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// GrantValidator rejects grants the grant controller would mark
// ValidationFailed, so an administrator learns at once, field by field. It
// also keeps delegated subdivision (package delegation) honest: a delegated
// grant's create or raise is admitted only if it fits the parent's cap
// (handOut), and a platform grant may be written only by the platform
// (platformGuard).
type GrantValidator struct {
	Reader          client.Reader
	SystemNamespace string
	// HandOut reserves delegated amounts against their parent's cap; nil
	// refuses every create or raise of a delegated grant.
	HandOut *HandOut
	// Authorizer asks the API server whether a user may write platform
	// grants (SubjectAccessReviews).
	Authorizer client.Client
}

var _ admission.Validator[*quotav1alpha1.ResourceGrant] = (*GrantValidator)(nil)

func (v *GrantValidator) ValidateCreate(ctx context.Context, g *quotav1alpha1.ResourceGrant) (admission.Warnings, error) {
	if err := v.platformGuard(ctx, "create", g); err != nil {
		return nil, err
	}
	warnings, err := v.validate(ctx, g)
	if err != nil {
		return nil, err
	}
	return warnings, v.HandOut.admit(ctx, nil, g)
}

// ValidateUpdate judges only spec changes: a grant whose registration went
// away must still accept label edits and finalizer removal.
func (v *GrantValidator) ValidateUpdate(ctx context.Context, old, g *quotav1alpha1.ResourceGrant) (admission.Warnings, error) {
	if err := v.platformGuard(ctx, "update", old); err != nil {
		return nil, err
	}
	if apiequality.Semantic.DeepEqual(old.Spec, g.Spec) {
		return nil, nil
	}
	warnings, err := v.validate(ctx, g)
	if err != nil {
		return nil, err
	}
	return warnings, v.HandOut.admit(ctx, old, g)
}

// ValidateDelete lets a delegated grant go (its amount returns to the cap
// once the delegation controller observes it gone) and keeps a platform
// grant from the parent's admin.
func (v *GrantValidator) ValidateDelete(ctx context.Context, g *quotav1alpha1.ResourceGrant) (admission.Warnings, error) {
	return nil, v.platformGuard(ctx, "delete", g)
}

// platformGuard admits a write of a platform grant (no spec.delegatedFrom;
// for an update, the stored one, since the field is immutable) only from
// a user the API server authorizes to do the same to ResourceGrants in the
// system namespace, where the platform's own grants (an organization's
// cap) live. The quota admin role, bound cluster-wide, the manager and the
// cluster's own controllers (garbage and namespace collection) may; an
// organization's admin, whose role is bound in the organization's
// namespaces, may write ResourceGrants there but only delegated ones. RBAC
// cannot say "only grants with this field", and a kind of its own would
// give delegated allowances a second path into every limit (docs/api.md,
// "Delegated allowances").
func (v *GrantValidator) platformGuard(ctx context.Context, verb string, g *quotav1alpha1.ResourceGrant) error {
	if g.IsDelegated() || v.Authorizer == nil {
		return nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	u := req.UserInfo
	extra := map[string]authorizationv1.ExtraValue{}
	for k, vals := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(vals)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: v.SystemNamespace, Verb: verb, Group: quotav1alpha1.GroupVersion.Group, Resource: "resourcegrants",
		},
	}}
	if err := v.Authorizer.Create(ctx, sar); err != nil {
		return apierrors.NewInternalError(fmt.Errorf("asking whether %q may write platform grants: %w", u.Username, err))
	}
	if sar.Status.Allowed {
		return nil
	}
	return apierrors.NewForbidden(quotav1alpha1.GroupVersion.WithResource("resourcegrants").GroupResource(), g.Name, fmt.Errorf(
		"%s is a platform grant: only the platform's quota admins (who may %s resourcegrants in %s) may %s it; %q may hand out its parent's cap with a grant that sets spec.delegatedFrom",
		g.Namespace+"/"+g.Name, verb, v.SystemNamespace, verb, u.Username))
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
	if g.IsDelegated() {
		ns := &corev1.Namespace{}
		if err := v.Reader.Get(ctx, types.NamespacedName{Name: g.Namespace}, ns); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, err
			}
			ns = nil
		}
		verdict.Errors = append(verdict.Errors, validation.ValidateDelegation(g, ns)...)
	}
	if len(verdict.Errors) > 0 {
		return nil, apierrors.NewInvalid(quotav1alpha1.GroupVersion.WithKind("ResourceGrant").GroupKind(), g.Name, verdict.Errors)
	}
	return verdict.Pending, nil
}

var errNoHandOut = errors.New("this manager does not serve delegated allowances")
