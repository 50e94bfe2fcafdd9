package builtins_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/claimpolicies"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

func usePolicies(t *testing.T, ps ...*quotav1alpha1.ClaimCreationPolicy) {
	t.Helper()
	useEnv(t, func(env *builtins.Env) { env.ClaimPolicies = claimpolicies.NewSet(ps...) })
}

// podsPolicy claims replicas pods from the Deployment's namespace, in a
// claim annotated with who asked for what.
func podsPolicy() *builders.ClaimPolicyWrapper {
	return builders.ClaimPolicy("pods", "apps/v1", "Deployment",
		quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: "{{ trigger.metadata.namespace }}"}).
		TargetName("{{ trigger.metadata.name }}-pods").
		TargetLabel("app", "{{ trigger.metadata.name }}").
		TargetAnnotation("request", `{{ user.username + " " + requestInfo.operation + " " + requestInfo.resource.resource + " " + string(requestInfo.dryRun) }}`).
		Request("core/pods", intstr.FromString("{{ trigger.spec.replicas }}"))
}

// deploymentRequest is quota.policy_claim's argument for a Deployment; a
// nil request leaves it out, as audit has none.
func deploymentRequest(replicas any, request map[string]any) map[string]any {
	in := map[string]any{
		"policy": "pods",
		"object": map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "team-a"},
			"spec":     map[string]any{"replicas": replicas},
		},
		"namespace": map[string]any{"name": "team-a", "labels": map[string]any{}},
	}
	if request != nil {
		in["request"] = request
	}
	return in
}

func TestPolicyClaimRendersWithTheRequest(t *testing.T) {
	usePolicies(t, podsPolicy().Obj())
	got := mustEval(t, "quota.policy_claim(input)", deploymentRequest(3, map[string]any{
		"operation": "CREATE", "userInfo": map[string]any{"username": "alice", "groups": []any{"devs"}},
		"resource": map[string]any{"group": "apps", "version": "v1", "resource": "deployments"},
	}))
	assertEqual(t, "result", got, map[string]any{
		"applies": true,
		"claim": map[string]any{
			"requests": []any{map[string]any{
				"consumer":     map[string]any{"apiGroup": "", "kind": "Namespace", "name": "team-a", "namespace": ""},
				"resourceType": "core/pods", "amount": jsonNumber(3), "dimensions": map[string]any{},
			}},
			"metadata": map[string]any{
				"name":        "web-pods",
				"labels":      map[string]any{"app": "web"},
				"annotations": map[string]any{"request": "alice CREATE deployments false"},
			},
		},
	})
}

// Audit and the observer have no request: every variable is there, empty.
func TestPolicyClaimWithoutARequestSeesEmptyVariables(t *testing.T) {
	usePolicies(t, podsPolicy().Condition(`size(user.groups) == 0 && user.extra == {} && requestInfo.name == ""`).Obj())
	got := mustEval(t, "quota.policy_claim(input).claim.metadata.annotations", deploymentRequest(3, nil))
	assertEqual(t, "annotations", got, map[string]any{"request": "   false"})
}

func TestPolicyClaimAnswersAPolicyErrorAndHaltsOnBadInput(t *testing.T) {
	usePolicies(t, podsPolicy().Obj())
	got := mustEval(t, "quota.policy_claim(input)", deploymentRequest(2.5, nil))
	assertEqual(t, "a fractional amount", got, map[string]any{
		"error": `ClaimCreationPolicy "pods": spec.target.resourceClaimTemplate.spec.requests[0].amount: Invalid value: "{{ trigger.spec.replicas }}": evaluated to 2.5, not a whole number`,
	})
	got = mustEval(t, "quota.policy_claim(input)", map[string]any{"policy": "other", "object": map[string]any{}, "namespace": map[string]any{"name": ""}})
	assertEqual(t, "an unknown policy", got, map[string]any{"error": `ClaimCreationPolicy "other": not found`})

	for _, tc := range []struct {
		name  string
		input any
		want  string
	}{
		{"not an object", "pods", "quota.policy_claim: request: must be an object, got string"},
		{"no policy, no object, no namespace", map[string]any{}, "quota.policy_claim: request.policy: required; request.object: required; request.namespace: required"},
		{"misspelt field", map[string]any{"policy": "pods", "object": map[string]any{}, "namespace": map[string]any{"name": ""}, "generaton": 1},
			"quota.policy_claim: request.generaton: unknown field (allowed: policy, generation, object, namespace, request)"},
		{"negative generation", map[string]any{"policy": "pods", "object": map[string]any{}, "namespace": map[string]any{"name": ""}, "generation": -1},
			"quota.policy_claim: request.generation: must be a whole number, at least 0, got -1"},
		{"object not an object", map[string]any{"policy": "pods", "object": []any{}, "namespace": map[string]any{"name": ""}},
			"quota.policy_claim: request.object: must be an object, got array"},
		{"namespace without a name, labels not strings", map[string]any{"policy": "pods", "object": map[string]any{}, "namespace": map[string]any{"labels": map[string]any{"a": 1}}},
			"quota.policy_claim: request.namespace.name: required; request.namespace.labels[a]: must be a string, got number"},
		{"namespace with an unknown field", map[string]any{"policy": "pods", "object": map[string]any{}, "namespace": map[string]any{"name": "", "uid": "x"}},
			"quota.policy_claim: request.namespace.uid: unknown field (allowed: name, labels)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := eval(t, "quota.policy_claim(input)", tc.input)
			if got := haltMessage(t, err); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// The rendered consumer is judged against the object's namespace as the
// claim webhook judges a ResourceClaim there: a Deployment of team-a
// labelled to charge team-b is refused, naming the policy and the consumer.
func TestPolicyClaimRefusesAConsumerTheNamespaceDoesNotBelongTo(t *testing.T) {
	usePolicies(t, builders.ClaimPolicy("pods", "apps/v1", "Deployment",
		quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: "{{ trigger.metadata.labels.charge }}"}).
		Request("core/pods", intstr.FromString("{{ trigger.spec.replicas }}")).Obj())
	in := deploymentRequest(3, nil)
	in["object"].(map[string]any)["metadata"] = map[string]any{"name": "web", "namespace": "team-a", "labels": map[string]any{"charge": "team-b"}}
	got := mustEval(t, "quota.policy_claim(input)", in)
	assertEqual(t, "another tenant's consumer", got, map[string]any{
		"error": `ClaimCreationPolicy "pods": spec.target.resourceClaimTemplate.spec.consumerRef: Forbidden: a claim in namespace "team-a" may not claim the quota of namespace "team-b"`,
	})
	in["object"].(map[string]any)["metadata"] = map[string]any{"name": "web", "namespace": "team-a", "labels": map[string]any{"charge": "team-a"}}
	got = mustEval(t, "quota.policy_claim(input).claim.requests[0].consumer.name", in)
	assertEqual(t, "its own namespace", got, "team-a")
}

func TestPolicyClaimWithoutPoliciesHalts(t *testing.T) {
	_, err := eval(t, "quota.policy_claim(input)", deploymentRequest(1, nil))
	want := "quota.policy_claim: no ClaimCreationPolicies configured: the hosting process must set them in the builtins' Env (Env.ClaimPolicies)"
	if got := haltMessage(t, err); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
