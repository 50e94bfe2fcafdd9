package controllers_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/claimpolicies"
	"github.com/quotakeeper/quotakeeper/internal/counted"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// constraintOf reads the QuotaClaimPolicy constraint named name; nil when
// there is none.
func constraintOf(name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(claimpolicies.ConstraintGVK)
	err := k8s.Get(ctx, client.ObjectKey{Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return u, err
}

// wantConstraint waits until the policy's constraint has exactly the spec
// the manager keeps for its current generation, and its owner reference.
func wantConstraint(t *testing.T, p *quotav1alpha1.ClaimCreationPolicy) *unstructured.Unstructured {
	t.Helper()
	var got *unstructured.Unstructured
	testenv.Eventually(t, settle, "constraint of "+p.Name, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		var err error
		if got, err = constraintOf(p.Name); err != nil || got == nil {
			return fmt.Errorf("no constraint (%w)", err)
		}
		spec := map[string]any{
			"enforcementAction": "deny",
			"match":             map[string]any{"kinds": []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"ConfigMap"}}}},
			"parameters":        map[string]any{"policy": p.Name, "generation": p.Generation},
		}
		// The manager's webhook stamps the policy version (package counted).
		want := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		want.SetKind("QuotaClaimPolicy")
		want.SetName(p.Name)
		version, err := counted.Version(want)
		if err != nil {
			return err
		}
		spec["parameters"].(map[string]any)[counted.Field] = version
		if diff := cmp.Diff(spec, got.Object["spec"]); diff != "" {
			return fmt.Errorf("spec (-want +got):\n%s", diff)
		}
		owner := []metav1.OwnerReference{{APIVersion: "quota.miloapis.com/v1alpha1", Kind: "ClaimCreationPolicy", Name: p.Name, UID: p.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
		if diff := cmp.Diff(owner, got.GetOwnerReferences()); diff != "" {
			return fmt.Errorf("owner references (-want +got):\n%s", diff)
		}
		return nil
	})
	return got
}

func wantNoConstraint(t *testing.T, name string) {
	t.Helper()
	testenv.Eventually(t, settle, "no constraint "+name, func() error {
		got, err := constraintOf(name)
		if err != nil {
			return err
		}
		if got != nil {
			return fmt.Errorf("constraint %s still there", name)
		}
		return nil
	})
}

// The manager keeps one QuotaClaimPolicy constraint per Ready policy: made
// when it turns Ready, following its generation, restored when deleted by
// hand, removed when the policy is disabled or deleted.
func TestClaimPolicyConstraintFollowsThePolicy(t *testing.T) {
	needEnv(t)
	p := claimPolicyObject("t41-claim", rtConfigMaps)
	createPolicy(t, p)
	wantReady(t, p, metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, readyMessage)
	c := wantConstraint(t, p)

	t.Run("an edit moves the constraint to the new generation", func(t *testing.T) {
		p.Spec.Trigger.Conditions = []quotav1alpha1.TriggerCondition{{Expression: `trigger.metadata.name != "exempt"`}}
		if err := k8s.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		wantReady(t, p, metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, readyMessage)
		if c = wantConstraint(t, p); p.Generation != 2 {
			t.Errorf("generation %d, want 2", p.Generation)
		}
	})

	t.Run("a constraint deleted by hand comes back", func(t *testing.T) {
		if err := k8s.Delete(ctx, c); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, settle, "a new constraint", func() error {
			got, err := constraintOf(p.Name)
			if err != nil || got == nil || got.GetUID() == c.GetUID() {
				return fmt.Errorf("not recreated yet (%w)", err)
			}
			return nil
		})
		wantConstraint(t, p)
	})

	t.Run("a disabled policy has no constraint, until enabled again", func(t *testing.T) {
		p.Spec.Disabled = true
		if err := k8s.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		wantReady(t, p, metav1.ConditionFalse, quotav1alpha1.ReasonPolicyDisabled, "spec.disabled is true")
		wantNoConstraint(t, p.Name)
		p.Spec.Disabled = false
		if err := k8s.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		wantReady(t, p, metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, readyMessage)
		wantConstraint(t, p)
	})

	t.Run("a deleted policy takes its constraint with it", func(t *testing.T) {
		// No garbage collector runs here: the controller deletes it itself.
		if err := k8s.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		wantNoConstraint(t, p.Name)
	})
}

// A policy that is not Ready (here: its resource type is not registered)
// has no constraint: nothing enforces a policy the status says is invalid.
func TestClaimPolicyNotReadyHasNoConstraint(t *testing.T) {
	needEnv(t)
	p := claimPolicyObject("t42-claim", "t42.example.com/widgets")
	createPolicy(t, p)
	wantReady(t, p, metav1.ConditionFalse, quotav1alpha1.ReasonValidationFailed,
		`spec.target.resourceClaimTemplate.spec.requests[0].resourceType: Invalid value: "t42.example.com/widgets": no ResourceRegistration declares this resource type`)
	newRegistration(t, "t42-widgets", "t42.example.com/widgets", quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"})
	wantReady(t, p, metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, readyMessage)
	wantConstraint(t, p)
	deleteAndWait(t, &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "t42-widgets"}})
	wantNoConstraint(t, p.Name)
}
