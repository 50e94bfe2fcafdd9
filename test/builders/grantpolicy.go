package builders

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// GrantPolicyWrapper builds a GrantCreationPolicy.
type GrantPolicyWrapper struct {
	quotav1alpha1.GrantCreationPolicy
}

// GrantPolicy starts a GrantCreationPolicy named name on objects of
// apiVersion and kind, granting to consumer.
func GrantPolicy(name, apiVersion, kind string, consumer quotav1alpha1.ConsumerRefTemplate) *GrantPolicyWrapper {
	w := &GrantPolicyWrapper{quotav1alpha1.GrantCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	w.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: apiVersion, Kind: kind}
	w.Spec.Target.ResourceGrantTemplate.Spec.ConsumerRef = consumer
	return w
}

// Obj returns the policy.
func (w *GrantPolicyWrapper) Obj() *quotav1alpha1.GrantCreationPolicy { return &w.GrantCreationPolicy }

// Condition adds a trigger condition.
func (w *GrantPolicyWrapper) Condition(expression string) *GrantPolicyWrapper {
	w.Spec.Trigger.Conditions = append(w.Spec.Trigger.Conditions, quotav1alpha1.TriggerCondition{Expression: expression})
	return w
}

// Allowance adds an allowance of resourceType with one bucket per amount (an
// int, a quantity or a {{ expr }}), each applying to every dimension.
func (w *GrantPolicyWrapper) Allowance(resourceType string, amounts ...intstr.IntOrString) *GrantPolicyWrapper {
	a := quotav1alpha1.AllowanceTemplate{ResourceType: resourceType}
	for _, n := range amounts {
		a.Buckets = append(a.Buckets, quotav1alpha1.GrantBucketTemplate{Amount: n})
	}
	return w.Allowances(a)
}

// Allowances adds allowance templates as given.
func (w *GrantPolicyWrapper) Allowances(a ...quotav1alpha1.AllowanceTemplate) *GrantPolicyWrapper {
	t := &w.Spec.Target.ResourceGrantTemplate.Spec
	t.Allowances = append(t.Allowances, a...)
	return w
}

// Parent sets the parent context: the cluster-scoped object of kind (in
// apiGroup) that nameExpression names owns the grants.
func (w *GrantPolicyWrapper) Parent(apiGroup, kind, nameExpression string) *GrantPolicyWrapper {
	w.Spec.Target.ParentContext = &quotav1alpha1.ParentContext{APIGroup: apiGroup, Kind: kind, NameExpression: nameExpression}
	return w
}

// GrantName sets the grant's metadata.name template.
func (w *GrantPolicyWrapper) GrantName(name string) *GrantPolicyWrapper {
	w.Spec.Target.ResourceGrantTemplate.Metadata.Name = name
	return w
}

// GrantNamespace sets the grant's metadata.namespace template.
func (w *GrantPolicyWrapper) GrantNamespace(namespace string) *GrantPolicyWrapper {
	w.Spec.Target.ResourceGrantTemplate.Metadata.Namespace = namespace
	return w
}

// GrantLabel sets a label of the grant (its value may be a template).
func (w *GrantPolicyWrapper) GrantLabel(key, value string) *GrantPolicyWrapper {
	md := &w.Spec.Target.ResourceGrantTemplate.Metadata
	if md.Labels == nil {
		md.Labels = map[string]string{}
	}
	md.Labels[key] = value
	return w
}

// GrantAnnotation sets an annotation of the grant (its value may be a
// template).
func (w *GrantPolicyWrapper) GrantAnnotation(key, value string) *GrantPolicyWrapper {
	md := &w.Spec.Target.ResourceGrantTemplate.Metadata
	if md.Annotations == nil {
		md.Annotations = map[string]string{}
	}
	md.Annotations[key] = value
	return w
}

// Disabled sets spec.disabled.
func (w *GrantPolicyWrapper) Disabled() *GrantPolicyWrapper {
	w.Spec.Disabled = true
	return w
}

// Generation sets metadata.generation.
func (w *GrantPolicyWrapper) Generation(g int64) *GrantPolicyWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// Ready sets the Ready condition with status and reason for the current
// generation.
func (w *GrantPolicyWrapper) Ready(status metav1.ConditionStatus, reason, message string) *GrantPolicyWrapper {
	w.Status.ObservedGeneration = w.ObjectMeta.Generation
	w.Status.Conditions = append(w.Status.Conditions, condition(quotav1alpha1.ConditionReady, status, w.ObjectMeta.Generation, reason, message))
	return w
}
