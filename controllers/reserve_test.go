package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/grants"
	"github.com/quotakeeper/quotakeeper/ledger"
)

const reservePath = "/reserve-configmaps"

// reserveWebhookConfiguration sends ConfigMap creations in namespaces
// labelled reserveLabel=true to the admission side; envtest fills in the CA.
func reserveWebhookConfiguration(port int) *admissionv1.ValidatingWebhookConfiguration {
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, reservePath)
	fail := admissionv1.Fail
	sideEffects := admissionv1.SideEffectClassNoneOnDryRun
	return &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "quotakeeper-test-reserve"},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:         "reserve.quotakeeper-test.io",
			ClientConfig: admissionv1.WebhookClientConfig{URL: &url},
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{reserveLabel: "true"}},
			FailurePolicy:           &fail,
			SideEffects:             &sideEffects,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}

// reserver does at admission what the quota.reserve builtin does: reserve
// one ConfigMap of the namespace's quota under the object's uid, all or
// nothing, and deny when it does not fit. It fails closed until its mirror
// holds every grant.
type reserver struct {
	ledger *ledger.Ledger
	mirror *grants.Mirror
}

func (r *reserver) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.DryRun != nil && *req.DryRun {
		return admission.Allowed("dry run")
	}
	if !r.mirror.HasSynced() {
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("grants not loaded yet"))
	}
	var obj metav1.PartialObjectMetadata
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if obj.UID == "" {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("object has no uid at validating admission"))
	}
	claim := ledger.Claim{
		ID:     string(obj.UID),
		Object: ledger.ObjectRef{Kind: "ConfigMap", Namespace: req.Namespace, Name: obj.Name, UID: string(obj.UID)},
		Requests: []ledger.Request{{
			Consumer: ledger.Consumer{Kind: "Namespace", Name: req.Namespace}, ResourceType: rtConfigMaps, Amount: 1,
		}},
	}
	d, err := r.ledger.Reserve(ctx, claim)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if !d.Granted {
		return admission.Denied(d.Message())
	}
	if _, ok := obj.Annotations[denyAfterReserve]; ok {
		return admission.Denied("denied by a later admission check")
	}
	return admission.Allowed(d.Message())
}

// createConfigMapRegistration registers what the admission side reserves.
func createConfigMapRegistration(ctx context.Context) error {
	reg := &quotav1alpha1.ResourceRegistration{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps-per-namespace"},
		Spec: quotav1alpha1.ResourceRegistrationSpec{
			ConsumerTypeRef:   quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"},
			Type:              quotav1alpha1.RegistrationTypeEntity,
			ResourceType:      rtConfigMaps,
			BaseUnit:          "configmap",
			ClaimingResources: []quotav1alpha1.GroupKind{{Kind: "ConfigMap"}},
		},
	}
	return k8s.Create(ctx, reg)
}
