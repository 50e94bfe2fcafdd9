package observer

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A constraint that checks scales at admission lists autoscaling/Scale in
// match.kinds; the observer watches the workload kinds, never Scale (it
// cannot be listed).
func TestMatchKindsLeavesScaleToAdmission(t *testing.T) {
	constraint := func(kinds ...any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"match": map[string]any{"kinds": kinds}}}}
	}
	entry := func(group string, kinds ...any) map[string]any {
		return map[string]any{"apiGroups": []any{group}, "kinds": kinds}
	}
	p := &policy{constraints: map[schema.GroupKind]map[string]*unstructured.Unstructured{
		{Group: "constraints.gatekeeper.sh", Kind: "QuotaAllocation"}: {
			"cpu": constraint(entry("apps", "Deployment", "StatefulSet"), entry("autoscaling", "Scale")),
		},
		{Group: "constraints.gatekeeper.sh", Kind: "QuotaEntity"}: {
			"anything": constraint(entry("*", "*")),
		},
	}}
	kinds, unwatchable := p.matchKinds()
	want := []schema.GroupKind{{Group: "apps", Kind: "Deployment"}, {Group: "apps", Kind: "StatefulSet"}}
	if !slices.Equal(kinds, want) {
		t.Errorf("kinds = %v, want %v", kinds, want)
	}
	if !slices.Equal(unwatchable, []string{"QuotaEntity/anything"}) {
		t.Errorf("unwatchable = %v, want [QuotaEntity/anything]", unwatchable)
	}
}

// Only deny constraints count; one a QuotaBypass relaxed to warn counts as
// the action it had, so what the bypass lets in is still counted.
func TestDeniesCountsRelaxedConstraintsAsTheirOriginalAction(t *testing.T) {
	constraint := func(action string, annotations map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"enforcementAction": action}}}
		if annotations != nil {
			u.Object["metadata"] = map[string]any{"annotations": annotations}
		}
		return u
	}
	relaxed := func(original string) map[string]any {
		return map[string]any{"quota.miloapis.com/bypass": "inc-42", "quota.miloapis.com/enforcement-action": original}
	}
	for _, c := range []struct {
		name string
		u    *unstructured.Unstructured
		want bool
	}{
		{"deny", constraint("deny", nil), true},
		{"warn", constraint("warn", nil), false},
		{"dryrun", constraint("dryrun", nil), false},
		{"warn relaxed from deny", constraint("warn", relaxed("deny")), true},
		{"warn with only the original action", constraint("warn", map[string]any{"quota.miloapis.com/enforcement-action": "deny"}), false},
		{"warn relaxed from warn", constraint("warn", relaxed("warn")), false},
	} {
		if got := denies(c.u); got != c.want {
			t.Errorf("%s: denies = %t, want %t", c.name, got, c.want)
		}
	}
}
