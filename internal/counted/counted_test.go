package counted_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/quotakeeper/quotakeeper/internal/counted"
)

func constraint(spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("constraints.gatekeeper.sh/v1beta1")
	u.SetKind("QuotaEntity")
	u.SetName("cm-limit")
	return u
}

func version(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	v, err := counted.Version(u)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The version covers the whole spec but the version itself: stamping it
// changes nothing, any change to match, action or parameters changes it.
func TestVersionCoversTheSpecButItself(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{
			"match":      map[string]any{"kinds": []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"ConfigMap"}}}},
			"parameters": map[string]any{"resourceType": "core/configmaps"},
		}
	}
	v := version(t, constraint(base()))
	if !strings.HasPrefix(v, "QuotaEntity/cm-limit/") || len(v) != len("QuotaEntity/cm-limit/")+16 {
		t.Fatalf("version %q, want QuotaEntity/cm-limit/<16 hex digits>", v)
	}
	stamped := constraint(base())
	if err := unstructured.SetNestedField(stamped.Object, v, "spec", "parameters", counted.Field); err != nil {
		t.Fatal(err)
	}
	if got := version(t, stamped); got != v {
		t.Errorf("stamped: version %q, want %q", got, v)
	}
	if got := counted.Stamped(stamped); got != v {
		t.Errorf("Stamped %q, want %q", got, v)
	}
	for name, change := range map[string]func(map[string]any){
		"namespaces":        func(s map[string]any) { s["match"].(map[string]any)["namespaces"] = []any{"team-a"} },
		"enforcementAction": func(s map[string]any) { s["enforcementAction"] = "warn" },
		"parameters":        func(s map[string]any) { s["parameters"].(map[string]any)["resourceType"] = "core/secrets" },
	} {
		s := base()
		change(s)
		if got := version(t, constraint(s)); got == v {
			t.Errorf("%s changed: version unchanged %q", name, got)
		}
	}
}

func TestRecordHasOnlyThePublishedDigest(t *testing.T) {
	r := counted.Record{}
	r.Add("QuotaEntity/cm-limit/00000000000000aa")
	r.Add("not a version")
	if len(r) != 1 || r["QuotaEntity.cm-limit"] != "00000000000000aa" {
		t.Fatalf("record %v", r)
	}
	for v, want := range map[string]bool{
		"QuotaEntity/cm-limit/00000000000000aa": true,
		"QuotaEntity/cm-limit/00000000000000bb": false,
		"QuotaEntity/other/00000000000000aa":    false,
		"":                                      false,
	} {
		if got := r.Has(v); got != want {
			t.Errorf("Has(%q) = %v, want %v", v, got, want)
		}
	}
}

// Only deny constraints count; one a QuotaBypass relaxed to warn counts as
// the action it had, so what the bypass lets in is still counted.
func TestCountsRelaxedConstraintsAsTheirOriginalAction(t *testing.T) {
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
		if got := counted.Counts(c.u); got != c.want {
			t.Errorf("%s: Counts = %t, want %t", c.name, got, c.want)
		}
	}
}

// A QuotaBypass relaxing a constraint to warn changes nothing counted, so
// not its version either; a constraint turned to warn for good does.
func TestVersionFollowsWhatIsCounted(t *testing.T) {
	spec := func(action string) map[string]any {
		return map[string]any{"enforcementAction": action, "parameters": map[string]any{"resourceType": "core/configmaps"}}
	}
	deny := version(t, constraint(spec("deny")))
	relaxed := constraint(spec("warn"))
	relaxed.SetAnnotations(map[string]string{"quota.miloapis.com/bypass": "inc-42", "quota.miloapis.com/enforcement-action": "deny"})
	if got := version(t, relaxed); got != deny {
		t.Errorf("relaxed by a bypass: version %q, want %q", got, deny)
	}
	if got := version(t, constraint(spec("warn"))); got == deny {
		t.Errorf("turned to warn: version unchanged %q", got)
	}
}
