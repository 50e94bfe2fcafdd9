package celpolicy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/celpolicy"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

// The GrantCreationPolicy `make run` applies (config/samples) renders what
// its comment promises.
func TestSampleGrantPolicyRenders(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "40-grant-policies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p quotav1alpha1.GrantCreationPolicy
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		t.Fatal(err)
	}
	g, errs := celpolicy.CompileGrantPolicy(&p)
	if len(errs) > 0 {
		t.Fatalf("the sample does not compile:\n%s", errorLines(errs))
	}
	namespace := func(labels map[string]any) map[string]any {
		meta := map[string]any{"name": "team-c"}
		if labels != nil {
			meta["labels"] = labels
		}
		return map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": meta}
	}
	for _, tc := range []struct {
		name   string
		labels map[string]any
		amount int64 // 0: the policy does not apply
	}{
		{"gold", map[string]any{"quota.example.com/tier": "gold"}, 10},
		{"silver", map[string]any{"quota.example.com/tier": "silver"}, 3},
		{"no tier", map[string]any{"team": "c"}, 0},
		{"no labels", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := g.Render(ctx, namespace(tc.labels))
			if err != nil {
				t.Fatal(err)
			}
			if res.Applies != (tc.amount > 0) {
				t.Fatalf("applies %v, want %v", res.Applies, tc.amount > 0)
			}
			if !res.Applies {
				return
			}
			want := builders.Grant("configmaps-team-c", "").
				Annotations(map[string]string{"quota.example.com/tier": tc.labels["quota.example.com/tier"].(string)}).
				Consumer(quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-c"}).
				Allowance("core/configmaps", tc.amount).Obj()
			if diff := cmp.Diff(want, res.Grant); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
