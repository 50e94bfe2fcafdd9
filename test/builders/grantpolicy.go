package builders

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// GrantPolicyWrapper builds a GrantCreationPolicy.
type GrantPolicyWrapper struct {
	quotav1alpha1.GrantCreationPolicy
	policy[*GrantPolicyWrapper]
}

// GrantPolicy starts a GrantCreationPolicy named name on objects of
// apiVersion and kind, granting to consumer.
func GrantPolicy(name, apiVersion, kind string, consumer quotav1alpha1.ConsumerRefTemplate) *GrantPolicyWrapper {
	w := &GrantPolicyWrapper{GrantCreationPolicy: quotav1alpha1.GrantCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	w.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: apiVersion, Kind: kind}
	w.Spec.Target.ResourceGrantTemplate.Spec.ConsumerRef = consumer
	w.policy = policy[*GrantPolicyWrapper]{self: w, meta: &w.ObjectMeta, trigger: &w.Spec.Trigger,
		target: &w.Spec.Target.ResourceGrantTemplate.Metadata, disabled: &w.Spec.Disabled, status: &w.Status}
	return w
}

// Obj returns the policy.
func (w *GrantPolicyWrapper) Obj() *quotav1alpha1.GrantCreationPolicy { return &w.GrantCreationPolicy }

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
