package webhooks

import (
	"context"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/quotakeeper/quotakeeper/internal/validation"
)

// +kubebuilder:webhook:path=/validate-constraints-gatekeeper-sh-v1beta1-quota,mutating=false,failurePolicy=fail,sideEffects=None,groups=constraints.gatekeeper.sh,resources=quotaentity;quotaallocation,verbs=create;update,versions=v1beta1,name=vquotaconstraint.quota.miloapis.com,timeoutSeconds=5,admissionReviewVersions=v1

// quotaConstraintPath is the path of QuotaConstraintValidator, as its
// kubebuilder marker says. The resources are "quotaentity" and
// "quotaallocation": Gatekeeper names a constraint CRD's plural after the
// kind in lower case, unpluralised (validation.QuotaConstraintKinds).
const quotaConstraintPath = "/validate-constraints-gatekeeper-sh-v1beta1-quota"

// QuotaConstraintValidator refuses a QuotaEntity or QuotaAllocation
// constraint whose count a tenant could walk past
// (validation.ValidateQuotaConstraint): one scoped by match.labelSelector,
// or counting replicas with the scale subresource unchecked. Gatekeeper
// makes the constraints' kinds from the templates at run time, so the
// webhook reads them as unstructured data, not as Go types.
type QuotaConstraintValidator struct{}

var _ admission.Handler = QuotaConstraintValidator{}

func (QuotaConstraintValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	c := &unstructured.Unstructured{}
	if err := c.UnmarshalJSON(req.Object.Raw); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	errs := validation.ValidateQuotaConstraint(c)
	if len(errs) == 0 {
		return admission.Allowed("")
	}
	// A constraint made before this rule (or before the webhook) may still
	// be edited for something else (a QuotaBypass relaxes it): an update
	// that adds no problem passes, with the problems as warnings.
	if req.Operation == admissionv1.Update {
		old := &unstructured.Unstructured{}
		if err := old.UnmarshalJSON(req.OldObject.Raw); err == nil && sameErrors(validation.ValidateQuotaConstraint(old), errs) {
			warnings := make([]string, len(errs))
			for i, e := range errs {
				warnings[i] = e.Error()
			}
			return admission.Allowed("").WithWarnings(warnings...)
		}
	}
	st := apierrors.NewInvalid(schema.GroupKind{Group: "constraints.gatekeeper.sh", Kind: c.GetKind()}, c.GetName(), errs)
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &st.ErrStatus}}
}

func sameErrors(a, b field.ErrorList) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Error() != b[i].Error() {
			return false
		}
	}
	return true
}
