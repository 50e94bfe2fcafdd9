package validation

import (
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// scalable are the built-in kinds with a scale subresource, by API group:
// kubectl scale and autoscalers change their replicas without an update of
// the object, so a quota counting replicas must check their Scales too.
var scalable = map[string][]string{
	"apps": {"Deployment", "ReplicaSet", "StatefulSet"},
	"":     {"ReplicationController"},
}

// QuotaConstraintKinds are the kinds of the shipped templates whose
// constraints an author writes (QuotaClaimPolicy constraints the manager
// writes itself): ValidateQuotaConstraint judges them.
var QuotaConstraintKinds = []string{"QuotaEntity", "QuotaAllocation"}

// ValidateQuotaConstraint checks what a QuotaEntity or QuotaAllocation
// constraint must say for its count to hold under every tenant action:
//   - no spec.match.labelSelector: the template never sees the constraint's
//     match, and Gatekeeper reviews an update whichever side of it matches,
//     so an update that labels an object into scope passed as unchanged
//     (issue 22, case 6); parameters.labelSelector, which the library
//     applies to the object before and after, says the same and holds;
//   - parameters.labelSelector, when set, is a valid label selector;
//   - a QuotaAllocation counting replicas checks their scale
//     (validateScale).
func ValidateQuotaConstraint(c *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if _, ok, _ := unstructured.NestedFieldNoCopy(c.Object, "spec", "match", "labelSelector"); ok {
		errs = append(errs, field.Forbidden(spec.Child("match", "labelSelector"),
			"a quota constraint cannot scope by match.labelSelector: an update that labels an object into scope would pass as unchanged; "+
				"use parameters.labelSelector, which the quota library applies to the object before and after an update"))
	}
	if sel, ok, _ := unstructured.NestedFieldNoCopy(c.Object, "spec", "parameters", "labelSelector"); ok {
		errs = append(errs, validateLabelSelector(spec.Child("parameters", "labelSelector"), sel)...)
	}
	if c.GetKind() == "QuotaAllocation" {
		errs = append(errs, validateScale(c)...)
	}
	return errs
}

func validateLabelSelector(p *field.Path, v any) field.ErrorList {
	data, err := json.Marshal(v)
	if err != nil {
		return field.ErrorList{field.Invalid(p, v, err.Error())}
	}
	var ls metav1.LabelSelector
	if err := json.Unmarshal(data, &ls); err != nil {
		return field.ErrorList{field.Invalid(p, string(data), "not a label selector: "+err.Error())}
	}
	return metav1validation.ValidateLabelSelector(&ls, metav1validation.LabelSelectorValidationOptions{}, p)
}

// validateScale: a QuotaAllocation whose amount depends on replicas
// (parameters.amount.replicasPath) also matches the autoscaling/v1 Scale
// kind, as Gatekeeper reviews a scale subresource, and lists in
// parameters.scaleTargets every built-in scalable kind it matches. Without
// both, `kubectl scale --replicas=20` passes unchecked and the observer then
// counts twenty (issue 22, case 3). A kind matched through "*" is not
// enumerable here: its scale target is the author's to list.
func validateScale(c *unstructured.Unstructured) field.ErrorList {
	spec := field.NewPath("spec")
	if _, ok, _ := unstructured.NestedFieldNoCopy(c.Object, "spec", "parameters", "amount", "replicasPath"); !ok {
		return nil
	}
	kinds, _, _ := unstructured.NestedSlice(c.Object, "spec", "match", "kinds")
	var errs field.ErrorList
	matchesScale := false
	type groupKind struct{ group, kind string }
	var workloads []groupKind
	where := map[groupKind]int{}
	for i, e := range kinds {
		m, _ := e.(map[string]any)
		groups, _, _ := unstructured.NestedStringSlice(m, "apiGroups")
		names, _, _ := unstructured.NestedStringSlice(m, "kinds")
		for _, g := range groups {
			for _, k := range names {
				if (g == "autoscaling" || g == "*") && (k == "Scale" || k == "*") {
					matchesScale = true
				}
				if slices.Contains(scalable[g], k) {
					gk := groupKind{g, k}
					if _, seen := where[gk]; !seen {
						where[gk] = i
						workloads = append(workloads, gk)
					}
				}
			}
		}
	}
	if !matchesScale {
		errs = append(errs, field.Required(spec.Child("match", "kinds"),
			`a QuotaAllocation whose amount depends on replicas (parameters.amount.replicasPath) must also match {apiGroups: ["autoscaling"], kinds: ["Scale"]}: `+
				"kubectl scale and autoscalers change replicas through the scale subresource, which Gatekeeper reviews as an autoscaling/v1 Scale"))
	}
	targets, _, _ := unstructured.NestedSlice(c.Object, "spec", "parameters", "scaleTargets")
	listed := map[groupKind]bool{}
	for _, t := range targets {
		m, _ := t.(map[string]any)
		g, _, _ := unstructured.NestedString(m, "apiGroup")
		k, _, _ := unstructured.NestedString(m, "kind")
		listed[groupKind{g, k}] = true
	}
	for _, gk := range workloads {
		if !listed[gk] {
			errs = append(errs, field.Required(spec.Child("parameters", "scaleTargets"),
				fmt.Sprintf("must list {apiGroup: %q, kind: %q} (matched in spec.match.kinds[%d]): its Scales are checked only for the kinds listed here",
					gk.group, gk.kind, where[gk])))
		}
	}
	return errs
}
