package claimpolicies

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// ConstraintGVK is the kind of the constraints that enforce
// ClaimCreationPolicies: the shipped QuotaClaimPolicy template's
// (templates/quotaclaimpolicy), served by Gatekeeper once the template is
// installed.
var ConstraintGVK = schema.GroupVersionKind{Group: "constraints.gatekeeper.sh", Version: "v1beta1", Kind: "QuotaClaimPolicy"}

// Enforced reports whether the manager keeps a constraint for p: not
// disabled, not being deleted, and Ready, for its current generation or,
// while the status controller has not judged an edit yet, for the one
// before. An edit must not lift the policy for that moment: without its
// constraint nothing is checked at admission and the observer stops
// counting the policy's objects, so creates in the gap were free and an
// object the edited policy no longer renders had nothing left to keep
// counting. A generation not yet judged is in force (see the package
// comment); a new policy waits for its first judgment.
func Enforced(p *quotav1alpha1.ClaimCreationPolicy) bool {
	ready := meta.FindStatusCondition(p.Status.Conditions, quotav1alpha1.ConditionReady)
	return p.DeletionTimestamp == nil && !p.Spec.Disabled && ready != nil && ready.Status == metav1.ConditionTrue
}

// Constraint is the QuotaClaimPolicy constraint that enforces p: named
// after it, owned by it (so the garbage collector removes it with the
// policy), matching the trigger's kind in every namespace (the policy's
// conditions choose among them), with parameters naming the policy and the
// generation it was made for. Changing the policy's spec changes the
// constraint, which is how Gatekeeper's audit and the observer learn that
// what its objects claim may have changed.
func Constraint(p *quotav1alpha1.ClaimCreationPolicy) (*unstructured.Unstructured, error) {
	gv, err := schema.ParseGroupVersion(p.Spec.Trigger.Resource.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("spec.trigger.resource.apiVersion: %w", err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"enforcementAction": "deny",
			"match": map[string]any{
				"kinds": []any{map[string]any{
					"apiGroups": []any{gv.Group},
					"kinds":     []any{p.Spec.Trigger.Resource.Kind},
				}},
			},
			"parameters": map[string]any{"policy": p.Name, "generation": p.Generation},
		},
	}}
	u.SetGroupVersionKind(ConstraintGVK)
	u.SetName(p.Name)
	u.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(p, quotav1alpha1.GroupVersion.WithKind("ClaimCreationPolicy"))})
	return u, nil
}

// OwnedConstraint reports whether a constraint is one the manager keeps for
// the policy of that name: its controller is that ClaimCreationPolicy. A
// QuotaClaimPolicy written by hand is left alone.
func OwnedConstraint(u *unstructured.Unstructured, policy string) bool {
	ref := metav1.GetControllerOf(u)
	return ref != nil && ref.Kind == "ClaimCreationPolicy" && ref.Name == policy &&
		ref.APIVersion == quotav1alpha1.GroupVersion.String()
}
