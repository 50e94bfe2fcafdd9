package webhooks

import (
	"context"
	"encoding/json"
	"net/http"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/quotakeeper/quotakeeper/internal/counted"
)

// +kubebuilder:webhook:path=/mutate-constraints-gatekeeper-sh-v1beta1-quota,mutating=true,failurePolicy=fail,sideEffects=None,groups=constraints.gatekeeper.sh,resources=quotaentity;quotaallocation;quotaclaimpolicy,verbs=create;update,versions=v1beta1,name=mquotaconstraint.quota.miloapis.com,timeoutSeconds=5,admissionReviewVersions=v1

// quotaConstraintVersionPath is the path of QuotaConstraintVersioner, as
// its kubebuilder marker says.
const quotaConstraintVersionPath = "/mutate-constraints-gatekeeper-sh-v1beta1-quota"

// QuotaConstraintVersioner writes a quota constraint's policy version
// (counted.Version) into spec.parameters.policyVersion as it is stored, so
// that Gatekeeper never holds a new or changed constraint without the
// version that tells quota.reserve whether the observer has counted under
// it yet (package counted). It covers the shipped templates' kinds; the
// observer stamps a constraint of any other quota template after the fact.
type QuotaConstraintVersioner struct{}

var _ admission.Handler = QuotaConstraintVersioner{}

func (QuotaConstraintVersioner) Handle(_ context.Context, req admission.Request) admission.Response {
	c := &unstructured.Unstructured{}
	if err := c.UnmarshalJSON(req.Object.Raw); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	version, err := counted.Version(c)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if counted.Stamped(c) == version {
		return admission.Allowed("")
	}
	if err := unstructured.SetNestedField(c.Object, version, "spec", "parameters", counted.Field); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	stamped, err := json.Marshal(c.Object)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, stamped)
}
