package builders

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// ClaimPolicyWrapper builds a ClaimCreationPolicy.
type ClaimPolicyWrapper struct {
	quotav1alpha1.ClaimCreationPolicy
	policy[*ClaimPolicyWrapper]
}

// ClaimPolicy starts a ClaimCreationPolicy named name on objects of
// apiVersion and kind, claiming from consumer.
func ClaimPolicy(name, apiVersion, kind string, consumer quotav1alpha1.ConsumerRefTemplate) *ClaimPolicyWrapper {
	w := &ClaimPolicyWrapper{ClaimCreationPolicy: quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	w.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: apiVersion, Kind: kind}
	w.Spec.Target.ResourceClaimTemplate.Spec.ConsumerRef = consumer
	w.policy = policy[*ClaimPolicyWrapper]{self: w, meta: &w.ObjectMeta, trigger: &w.Spec.Trigger,
		target: &w.Spec.Target.ResourceClaimTemplate.Metadata, disabled: &w.Spec.Disabled, status: &w.Status}
	return w
}

// Obj returns the policy.
func (w *ClaimPolicyWrapper) Obj() *quotav1alpha1.ClaimCreationPolicy { return &w.ClaimCreationPolicy }

// Request adds a request of amount (an int, a quantity or a {{ expr }}) of
// resourceType.
func (w *ClaimPolicyWrapper) Request(resourceType string, amount intstr.IntOrString) *ClaimPolicyWrapper {
	t := &w.Spec.Target.ResourceClaimTemplate.Spec
	t.Requests = append(t.Requests, quotav1alpha1.ResourceRequestTemplate{ResourceType: resourceType, Amount: amount})
	return w
}
