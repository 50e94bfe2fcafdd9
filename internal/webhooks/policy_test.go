package webhooks_test

import (
	"fmt"
	"strings"
	"testing"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// Done when: invalid CEL (unknown function, wrong result type, unknown
// variable) is rejected at create with the field path, and nothing is
// stored.
func TestWebhooksRejectPoliciesThatDoNotCompile(t *testing.T) {
	needEnv(t)
	grantCases := []struct {
		name  string
		edit  func(*quotav1alpha1.GrantCreationPolicySpec)
		field string
		want  string
	}{
		{"unknown function", func(s *quotav1alpha1.GrantCreationPolicySpec) {
			s.Trigger.Conditions = append(s.Trigger.Conditions, quotav1alpha1.TriggerCondition{Expression: "invalid_function()"})
		}, "spec.trigger.conditions[1].expression", `Invalid value: "invalid_function()": compilation failed: 1:17: undeclared reference to 'invalid_function' (in container '')`},
		{"wrong result type", func(s *quotav1alpha1.GrantCreationPolicySpec) {
			s.Trigger.Conditions[0].Expression = "trigger.metadata.name"
		}, "spec.trigger.conditions[0].expression", `Invalid value: "trigger.metadata.name": must evaluate to bool but got dyn`},
		{"unknown variable", func(s *quotav1alpha1.GrantCreationPolicySpec) {
			s.Target.ResourceGrantTemplate.Metadata.Annotations = map[string]string{"requested-by": "{{ user.username }}"}
		}, "spec.target.resourceGrantTemplate.metadata.annotations[requested-by]",
			`Invalid value: "{{ user.username }}": compilation failed in {{ user.username }}: 1:1: undeclared reference to 'user' (in container '')`},
	}
	for i, tc := range grantCases {
		t.Run("GrantCreationPolicy "+tc.name, func(t *testing.T) {
			p := grantPolicyObject(fmt.Sprintf("t30-bad-%d", i), rtConfigMaps)
			tc.edit(&p.Spec)
			testenv.RequireInvalid(t, k8s.Create(ctx, p), tc.field, tc.want)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), &quotav1alpha1.GrantCreationPolicy{}); !apierrors.IsNotFound(err) {
				t.Fatalf("rejected policy stored: %v", err)
			}
		})
	}

	claimCases := []struct {
		name  string
		edit  func(*quotav1alpha1.ClaimCreationPolicySpec)
		field string
		want  string
	}{
		{"unknown function", func(s *quotav1alpha1.ClaimCreationPolicySpec) {
			s.Trigger.Conditions = []quotav1alpha1.TriggerCondition{{Expression: "true"}, {Expression: "invalid_function()"}}
		}, "spec.trigger.conditions[1].expression", `Invalid value: "invalid_function()": compilation failed: 1:17: undeclared reference to 'invalid_function' (in container '')`},
		{"wrong result type", func(s *quotav1alpha1.ClaimCreationPolicySpec) {
			s.Target.ResourceClaimTemplate.Spec.Requests[0].Amount = intstr.FromString("{{ trigger.metadata.name == 'a' }}")
		}, "spec.target.resourceClaimTemplate.spec.requests[0].amount",
			`Invalid value: "{{ trigger.metadata.name == 'a' }}": {{ trigger.metadata.name == 'a' }} must evaluate to int, string or kubernetes.Quantity but got bool`},
		{"unknown variable", func(s *quotav1alpha1.ClaimCreationPolicySpec) {
			s.Target.ResourceClaimTemplate.Spec.ConsumerRef.Name = "{{.parentOrg}}"
		}, "spec.target.resourceClaimTemplate.spec.consumerRef.name",
			`Invalid value: "{{.parentOrg}}": compilation failed in {{.parentOrg}}: 1:1: undeclared reference to 'parentOrg' (in container '')`},
	}
	for i, tc := range claimCases {
		t.Run("ClaimCreationPolicy "+tc.name, func(t *testing.T) {
			p := claimPolicyObject(fmt.Sprintf("t30-bad-%d", i), rtConfigMaps)
			tc.edit(&p.Spec)
			testenv.RequireInvalid(t, k8s.Create(ctx, p), tc.field, tc.want)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), &quotav1alpha1.ClaimCreationPolicy{}); !apierrors.IsNotFound(err) {
				t.Fatalf("rejected policy stored: %v", err)
			}
		})
	}

	// An update is judged on its new spec.
	p := grantPolicyObject("t30-ok", rtConfigMaps)
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.Trigger.Conditions[0].Expression = "size(trigger.metadata.name)"
	testenv.RequireInvalid(t, k8s.Patch(ctx, p, patch), "spec.trigger.conditions[0].expression",
		`Invalid value: "size(trigger.metadata.name)": must evaluate to bool but got int`)
}

// A GrantCreationPolicy's name labels every grant it creates, so it must
// be a label value: a longer name is refused at create rather than failing
// every grant.
func TestWebhookRejectsAGrantPolicyNameTooLongForItsLabel(t *testing.T) {
	needEnv(t)
	name := "t30-" + strings.Repeat("n", 60)
	p := grantPolicyObject(name, rtConfigMaps)
	testenv.RequireInvalid(t, k8s.Create(ctx, p), "metadata.name",
		fmt.Sprintf(`Invalid value: %q: must be no more than 63 bytes (the name is the quota.miloapis.com/policy label of the policy's grants)`, name))
}

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
