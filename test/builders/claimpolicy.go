package builders

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// ClaimPolicyWrapper builds a ClaimCreationPolicy.
type ClaimPolicyWrapper struct {
	quotav1alpha1.ClaimCreationPolicy
}

// ClaimPolicy starts a ClaimCreationPolicy named name on objects of
// apiVersion and kind, claiming from consumer.
func ClaimPolicy(name, apiVersion, kind string, consumer quotav1alpha1.ConsumerRefTemplate) *ClaimPolicyWrapper {
	w := &ClaimPolicyWrapper{quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	w.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: apiVersion, Kind: kind}
	w.Spec.Target.ResourceClaimTemplate.Spec.ConsumerRef = consumer
	return w
}

// Obj returns the policy.
func (w *ClaimPolicyWrapper) Obj() *quotav1alpha1.ClaimCreationPolicy { return &w.ClaimCreationPolicy }

// Condition adds a trigger condition.
func (w *ClaimPolicyWrapper) Condition(expression string) *ClaimPolicyWrapper {
	w.Spec.Trigger.Conditions = append(w.Spec.Trigger.Conditions, quotav1alpha1.TriggerCondition{Expression: expression})
	return w
}

// Request adds a request of amount (an int, a quantity or a {{ expr }}) of
// resourceType.
func (w *ClaimPolicyWrapper) Request(resourceType string, amount intstr.IntOrString) *ClaimPolicyWrapper {
	t := &w.Spec.Target.ResourceClaimTemplate.Spec
	t.Requests = append(t.Requests, quotav1alpha1.ResourceRequestTemplate{ResourceType: resourceType, Amount: amount})
	return w
}

// ClaimName sets the claim's metadata.name template.
func (w *ClaimPolicyWrapper) ClaimName(name string) *ClaimPolicyWrapper {
	w.Spec.Target.ResourceClaimTemplate.Metadata.Name = name
	return w
}

// ClaimNamespace sets the claim's metadata.namespace template.
func (w *ClaimPolicyWrapper) ClaimNamespace(namespace string) *ClaimPolicyWrapper {
	w.Spec.Target.ResourceClaimTemplate.Metadata.Namespace = namespace
	return w
}

// ClaimLabel sets a label of the claim (its value may be a template).
func (w *ClaimPolicyWrapper) ClaimLabel(key, value string) *ClaimPolicyWrapper {
	md := &w.Spec.Target.ResourceClaimTemplate.Metadata
	if md.Labels == nil {
		md.Labels = map[string]string{}
	}
	md.Labels[key] = value
	return w
}

// ClaimAnnotation sets an annotation of the claim (its value may be a
// template).
func (w *ClaimPolicyWrapper) ClaimAnnotation(key, value string) *ClaimPolicyWrapper {
	md := &w.Spec.Target.ResourceClaimTemplate.Metadata
	if md.Annotations == nil {
		md.Annotations = map[string]string{}
	}
	md.Annotations[key] = value
	return w
}

// Disabled sets spec.disabled.
func (w *ClaimPolicyWrapper) Disabled() *ClaimPolicyWrapper {
	w.Spec.Disabled = true
	return w
}

// Generation sets metadata.generation.
func (w *ClaimPolicyWrapper) Generation(g int64) *ClaimPolicyWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// Ready sets the Ready condition with status and reason for the current
// generation.
func (w *ClaimPolicyWrapper) Ready(status metav1.ConditionStatus, reason, message string) *ClaimPolicyWrapper {
	w.Status.ObservedGeneration = w.ObjectMeta.Generation
	w.Status.Conditions = append(w.Status.Conditions, condition(quotav1alpha1.ConditionReady, status, w.ObjectMeta.Generation, reason, message))
	return w
}
