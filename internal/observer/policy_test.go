package observer

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	quotarego "github.com/quotakeeper/quotakeeper/rego"
	"github.com/quotakeeper/quotakeeper/test/testenv"
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

// Gatekeeper writes a constraint's status after every audit pass, and a
// template's as its pods come and go. Neither changes what an object
// counts, so neither may reload the policy: a reload evaluates every
// counted object again. A change of spec, or of the annotations a
// QuotaBypass writes, does.
func TestOnlyPolicyChangesReloadThePolicy(t *testing.T) {
	ctx := context.Background()
	p, tmpl, constraint := sampleQuotaEntity(t)
	gk := constraint.GroupVersionKind().GroupKind()
	reloads := func(what string, want bool, set func() (bool, error)) {
		t.Helper()
		before := p.version.Load()
		changed, err := set()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if reloaded := p.version.Load() != before; changed != want || reloaded != want {
			t.Errorf("%s: changed %t, version moved %t; want %t", what, changed, reloaded, want)
		}
	}
	setTemplate := func(u *unstructured.Unstructured) func() (bool, error) {
		return func() (bool, error) { _, changed, err := p.setTemplate(ctx, u); return changed, err }
	}
	setConstraint := func(u *unstructured.Unstructured) func() (bool, error) {
		return func() (bool, error) { return p.setConstraint(ctx, gk, u.GetName(), u) }
	}
	withStatus := func(u *unstructured.Unstructured, rv string, status map[string]any) *unstructured.Unstructured {
		u = u.DeepCopy()
		u.SetResourceVersion(rv)
		u.Object["status"] = status
		return u
	}

	reloads("the template, first", true, setTemplate(tmpl))
	reloads("the constraint, first", true, setConstraint(constraint))
	reloads("the template's status", false, setTemplate(withStatus(tmpl, "2", map[string]any{"created": true})))
	reloads("the constraint's audit status", false, setConstraint(withStatus(constraint, "2",
		map[string]any{"auditTimestamp": "2026-11-23T10:00:00Z", "totalViolations": int64(3)})))

	bypassed := withStatus(constraint, "3", nil)
	bypassed.SetAnnotations(map[string]string{"quota.miloapis.com/bypass": "inc-42", "quota.miloapis.com/enforcement-action": "deny"})
	reloads("a bypass annotation", true, setConstraint(bypassed))

	respecced := withStatus(bypassed, "4", nil)
	if err := unstructured.SetNestedField(respecced.Object, "core/configmaps-v2", "spec", "parameters", "resourceType"); err != nil {
		t.Fatal(err)
	}
	reloads("a new resourceType", true, setConstraint(respecced))

	rewritten := withStatus(tmpl, "5", nil)
	targets, _, _ := unstructured.NestedSlice(rewritten.Object, "spec", "targets")
	source := targets[0].(map[string]any)["code"].([]any)[0].(map[string]any)["source"].(map[string]any)
	source["rego"] = source["rego"].(string) + "\n# edited\n"
	if err := unstructured.SetNestedSlice(rewritten.Object, targets, "spec", "targets"); err != nil {
		t.Fatal(err)
	}
	reloads("the template's Rego", true, setTemplate(rewritten))
}

// sampleQuotaEntity returns an empty policy, the shipped QuotaEntity
// template and its shared-by-organization sample constraint (one
// Organization's ConfigMaps, as in make load).
func sampleQuotaEntity(tb testing.TB) (p *policy, tmpl, constraint *unstructured.Unstructured) {
	tb.Helper()
	p, err := newPolicy(&builtins.Env{})
	if err != nil {
		tb.Fatal(err)
	}
	objs, err := localcluster.ReadObjects(
		filepath.Join(testenv.RepoRoot(), "templates", "quotaentity", "template.yaml"),
		filepath.Join(testenv.RepoRoot(), "templates", "quotaentity", "samples", "shared-by-organization", "constraint.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	return p, objs[0], objs[1]
}

func TestShippedTemplatesAreQuotaTemplates(t *testing.T) {
	for _, name := range []string{"quotaentity", "quotaallocation"} {
		objs, err := localcluster.ReadObjects(filepath.Join("..", "..", "templates", name, "template.yaml"))
		if err != nil || len(objs) != 1 {
			t.Fatalf("%s: %v (%d objects)", name, err, len(objs))
		}
		if !quotarego.IsQuotaTemplate(objs[0]) {
			t.Errorf("%s is not recognised as a quota template", name)
		}
	}
	other := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"targets": []any{
		map[string]any{"rego": "package k8srequiredlabels", "libs": []any{"package lib.helpers"}},
	}}}}
	if quotarego.IsQuotaTemplate(other) {
		t.Error("a template without lib.quota is recognised as a quota template")
	}
}
