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
