package claimpolicies_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/celpolicy"
	"github.com/quotakeeper/quotakeeper/internal/claimpolicies"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

var ctx = context.Background()

func policy() *builders.ClaimPolicyWrapper {
	return builders.ClaimPolicy("configmaps", "v1", "ConfigMap",
		quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: "{{ trigger.metadata.namespace }}"}).
		Generation(2).TargetName("{{ trigger.metadata.name }}-claim").
		Request("core/configmaps", intstr.FromInt32(1))
}

// teamA is the namespace of input's object, as Gatekeeper attaches it.
var teamA = claimpolicies.Namespace{Name: "team-a", Known: true}

func input(apiVersion, kind string) celpolicy.ClaimInput {
	return celpolicy.ClaimInput{
		Trigger: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": "cm", "namespace": "team-a"}},
		User:    map[string]any{"username": "", "uid": "", "groups": []any{}, "extra": map[string]any{}},
		RequestInfo: map[string]any{"operation": "CREATE", "resource": map[string]any{"group": "", "version": "v1", "resource": "configmaps"},
			"subResource": "", "namespace": "team-a", "name": "cm", "dryRun": false},
	}
}

func TestClaim(t *testing.T) {
	rendered := builders.Claim("cm-claim", "").Consumer(quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-a"}).
		Request("core/configmaps", 1, nil).Obj()
	for _, tc := range []struct {
		name       string
		policy     *quotav1alpha1.ClaimCreationPolicy
		generation int64
		in         celpolicy.ClaimInput
		want       *quotav1alpha1.ResourceClaim
		err        string
	}{
		{name: "Ready", policy: policy().Ready(metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, "").Obj(),
			generation: 2, in: input("v1", "ConfigMap"), want: rendered},
		{name: "not judged yet: in force", policy: policy().Obj(), in: input("v1", "ConfigMap"), want: rendered},
		{name: "Ready for an older generation: in force", policy: func() *quotav1alpha1.ClaimCreationPolicy {
			p := policy().Generation(1).Ready(metav1.ConditionFalse, quotav1alpha1.ReasonValidationFailed, "x").Obj()
			p.Generation = 2
			return p
		}(), in: input("v1", "ConfigMap"), want: rendered},
		{name: "not Ready", policy: policy().Ready(metav1.ConditionFalse, quotav1alpha1.ReasonValidationFailed, "x").Obj(),
			in: input("v1", "ConfigMap")},
		{name: "disabled", policy: policy().Disabled().Obj(), in: input("v1", "ConfigMap")},
		{name: "another kind", policy: policy().Obj(), in: input("v1", "Secret")},
		{name: "another group", policy: policy().Obj(), in: input("example.com/v1", "ConfigMap")},
		{name: "another version of the kind", policy: policy().Obj(), in: input("v2", "ConfigMap"), want: rendered},
		{name: "a condition that does not hold", policy: policy().Condition(`trigger.metadata.name == "other"`).Obj(),
			in: input("v1", "ConfigMap")},
		{name: "older than asked", policy: policy().Obj(), generation: 3, in: input("v1", "ConfigMap"),
			err: `ClaimCreationPolicy "configmaps": generation 3 is not loaded yet (have 2); retry`},
		{name: "a CEL error", policy: policy().Condition(`trigger.spec.enabled == true`).Obj(), in: input("v1", "ConfigMap"),
			err: `ClaimCreationPolicy "configmaps": spec.trigger.conditions[0].expression: Invalid value: "trigger.spec.enabled == true": evaluation failed: no such key: spec`},
		{name: "does not compile", policy: policy().Condition(`invalid_function()`).Obj(), in: input("v1", "ConfigMap"),
			err: `ClaimCreationPolicy "configmaps": spec.trigger.conditions[0].expression: Invalid value: "invalid_function()": compilation failed: 1:17: undeclared reference to 'invalid_function' (in container '')`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := claimpolicies.NewSet(tc.policy).Claim(ctx, "configmaps", tc.generation, tc.in, teamA)
			if tc.err != "" {
				if _, ok := errors.AsType[*claimpolicies.Error](err); !ok || err.Error() != tc.err {
					t.Fatalf("got %v (%T)\nwant %s", err, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("claim (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClaimOfAnUnknownPolicy(t *testing.T) {
	_, err := claimpolicies.NewSet().Claim(ctx, "gone", 0, input("v1", "ConfigMap"), teamA)
	if want := `ClaimCreationPolicy "gone": not found`; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

// reader serves one policy, as a cache that has seen it before the set's
// event handler has.
type reader struct {
	client.Reader
	policy *quotav1alpha1.ClaimCreationPolicy
	reads  int
}

func (r *reader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.reads++
	if r.policy == nil || key.Name != r.policy.Name {
		return apierrors.NewNotFound(schema.GroupResource{Group: "quota.miloapis.com", Resource: "claimcreationpolicies"}, key.Name)
	}
	r.policy.DeepCopyInto(obj.(*quotav1alpha1.ClaimCreationPolicy))
	return nil
}

func TestALookupThatMissesReadsThrough(t *testing.T) {
	s := claimpolicies.NewSet(policy().Generation(1).Obj())
	r := &reader{policy: policy().Generation(2).Disabled().Obj()}
	s.ReadThrough(r)
	// Asked for generation 1: the set's copy answers.
	if got, err := s.Claim(ctx, "configmaps", 1, input("v1", "ConfigMap"), teamA); err != nil || got == nil || r.reads != 0 {
		t.Fatalf("generation 1: %v, %v, %d reads", got, err, r.reads)
	}
	// Asked for generation 2: read through, and the copy read is kept.
	for range 2 {
		if got, err := s.Claim(ctx, "configmaps", 2, input("v1", "ConfigMap"), teamA); err != nil || got != nil {
			t.Fatalf("generation 2 (disabled): %v, %v", got, err)
		}
	}
	if r.reads != 1 {
		t.Errorf("%d reads, want 1", r.reads)
	}
	// Gone from the cache too: not found.
	r.policy = nil
	if _, err := s.Claim(ctx, "configmaps", 3, input("v1", "ConfigMap"), teamA); err == nil || err.Error() != `ClaimCreationPolicy "configmaps": not found` {
		t.Errorf("deleted: %v", err)
	}
}

func TestConstraint(t *testing.T) {
	p := policy().Obj()
	p.UID = "uid-1"
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "resourcemanager.miloapis.com/v1alpha1", Kind: "Project"}
	got, err := claimpolicies.Constraint(p)
	if err != nil {
		t.Fatal(err)
	}
	want := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "constraints.gatekeeper.sh/v1beta1",
		"kind":       "QuotaClaimPolicy",
		"metadata": map[string]any{
			"name": "configmaps",
			"ownerReferences": []any{map[string]any{
				"apiVersion": "quota.miloapis.com/v1alpha1", "kind": "ClaimCreationPolicy", "name": "configmaps", "uid": "uid-1",
				"controller": true, "blockOwnerDeletion": true,
			}},
		},
		"spec": map[string]any{
			"enforcementAction": "deny",
			"match": map[string]any{"kinds": []any{map[string]any{
				"apiGroups": []any{"resourcemanager.miloapis.com"}, "kinds": []any{"Project"},
			}}},
			"parameters": map[string]any{"policy": "configmaps", "generation": int64(2)},
		},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("constraint (-want +got):\n%s", diff)
	}
	if !claimpolicies.OwnedConstraint(got, "configmaps") {
		t.Error("the constraint made for a policy is not owned by it")
	}
	got.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "configmaps", UID: "x", Controller: ptr.To(true)}})
	if claimpolicies.OwnedConstraint(got, "configmaps") {
		t.Error("a constraint another object controls is owned")
	}
	got.SetOwnerReferences(nil)
	if claimpolicies.OwnedConstraint(got, "configmaps") {
		t.Error("a constraint written by hand is owned")
	}
}

func TestEnforced(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy *quotav1alpha1.ClaimCreationPolicy
		want   bool
	}{
		{"Ready", policy().Ready(metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, "").Obj(), true},
		{"not judged", policy().Obj(), false},
		{"an edit not judged yet", func() *quotav1alpha1.ClaimCreationPolicy {
			p := policy().Ready(metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, "").Obj()
			p.Generation++
			return p
		}(), true},
		{"an edit not judged yet of a policy that was not Ready", func() *quotav1alpha1.ClaimCreationPolicy {
			p := policy().Ready(metav1.ConditionFalse, quotav1alpha1.ReasonValidationFailed, "").Obj()
			p.Generation++
			return p
		}(), false},
		{"disabled, not judged yet", func() *quotav1alpha1.ClaimCreationPolicy {
			p := policy().Ready(metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, "").Obj()
			p.Generation++
			p.Spec.Disabled = true
			return p
		}(), false},
		{"not Ready", policy().Ready(metav1.ConditionFalse, quotav1alpha1.ReasonPolicyDisabled, "").Obj(), false},
		{"deleting", func() *quotav1alpha1.ClaimCreationPolicy {
			p := policy().Ready(metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, "").Obj()
			p.DeletionTimestamp = &metav1.Time{}
			return p
		}(), false},
	} {
		if got := claimpolicies.Enforced(tc.policy); got != tc.want {
			t.Errorf("%s: Enforced %v, want %v", tc.name, got, tc.want)
		}
	}
}
