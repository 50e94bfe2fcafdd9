package controllers_test

import (
	"k8s.io/apimachinery/pkg/util/intstr"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

// grantPolicyObject is a GrantCreationPolicy giving every labelled
// Namespace 10 of resource type rt.
func grantPolicyObject(name, rt string) *quotav1alpha1.GrantCreationPolicy {
	return builders.GrantPolicy(name, "v1", "Namespace", quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: "{{.trigger.metadata.name}}"}).
		Condition(`has(trigger.metadata.labels) && "tenant" in trigger.metadata.labels`).
		Allowance(rt, intstr.FromInt32(10)).Obj()
}

// claimPolicyObject is a ClaimCreationPolicy claiming 1 of resource type
// rt for every ConfigMap, from its namespace.
func claimPolicyObject(name, rt string) *quotav1alpha1.ClaimCreationPolicy {
	return builders.ClaimPolicy(name, "v1", "ConfigMap", quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: "{{.trigger.metadata.namespace}}"}).
		Request(rt, intstr.FromInt32(1)).Obj()
}
