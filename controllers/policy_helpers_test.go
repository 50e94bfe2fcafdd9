package controllers_test

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// grantPolicyObject is a GrantCreationPolicy giving every labelled
// Namespace 10 of resource type rt.
func grantPolicyObject(name, rt string) *quotav1alpha1.GrantCreationPolicy {
	return &quotav1alpha1.GrantCreationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: quotav1alpha1.GrantCreationPolicySpec{
			Trigger: quotav1alpha1.PolicyTrigger{
				Resource:   quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "Namespace"},
				Conditions: []quotav1alpha1.TriggerCondition{{Expression: `has(trigger.metadata.labels) && "tenant" in trigger.metadata.labels`}},
			},
			Target: quotav1alpha1.GrantTarget{ResourceGrantTemplate: quotav1alpha1.ResourceGrantTemplate{
				Spec: quotav1alpha1.ResourceGrantSpecTemplate{
					ConsumerRef: quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: "{{.trigger.metadata.name}}"},
					Allowances: []quotav1alpha1.AllowanceTemplate{{ResourceType: rt,
						Buckets: []quotav1alpha1.GrantBucketTemplate{{Amount: intstr.FromInt32(10)}}}},
				},
			}},
		},
	}
}

// claimPolicyObject is a ClaimCreationPolicy claiming 1 of resource type
// rt for every ConfigMap, from its namespace.
func claimPolicyObject(name, rt string) *quotav1alpha1.ClaimCreationPolicy {
	return &quotav1alpha1.ClaimCreationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: quotav1alpha1.ClaimCreationPolicySpec{
			Trigger: quotav1alpha1.PolicyTrigger{Resource: quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}},
			Target: quotav1alpha1.ClaimTarget{ResourceClaimTemplate: quotav1alpha1.ResourceClaimTemplate{
				Spec: quotav1alpha1.ResourceClaimSpecTemplate{
					ConsumerRef: quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: "{{.trigger.metadata.namespace}}"},
					Requests:    []quotav1alpha1.ResourceRequestTemplate{{ResourceType: rt, Amount: intstr.FromInt32(1)}},
				},
			}},
		},
	}
}
