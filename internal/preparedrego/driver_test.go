package preparedrego_test

import (
	"context"
	"errors"
	"testing"

	constraintclient "github.com/open-policy-agent/frameworks/constraint/pkg/client"
	clienterrors "github.com/open-policy-agent/frameworks/constraint/pkg/client/errors"
	"github.com/open-policy-agent/frameworks/constraint/pkg/core/templates"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/target"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/util"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/quotakeeper/quotakeeper/internal/preparedrego"
)

// limitedTemplate denies a ConfigMap whose data has more keys than the
// constraint's parameters.max, and one named in the synced inventory's
// "forbidden" ConfigMap of its namespace (a v0 template, as most are; the
// library reached through data.lib).
func limitedTemplate(rego string) *templates.ConstraintTemplate {
	t := &templates.ConstraintTemplate{}
	t.Name = "limited"
	t.Spec.CRD.Spec.Names.Kind = "Limited"
	t.Spec.CRD.Spec.Validation = &templates.Validation{OpenAPIV3Schema: &apiextensions.JSONSchemaProps{
		Type:       "object",
		Properties: map[string]apiextensions.JSONSchemaProps{"max": {Type: "integer"}},
	}}
	t.Spec.Targets = []templates.Target{{
		Target: target.Name,
		Code: []templates.Code{{Engine: "Rego", Source: &templates.Anything{Value: map[string]any{
			"rego": rego,
			"libs": []any{"package lib.count\n\nkeys(o) = n { n := count(object.get(o, \"data\", {})) }\n"},
		}}}},
	}}
	return t
}

const limitedRego = `package limited

import data.lib.count

violation[{"msg": msg, "details": {"keys": n}}] {
  n := count.keys(input.review.object)
  n > input.parameters.max
  msg := sprintf("%d keys, at most %d", [n, input.parameters.max])
}

violation[{"msg": "forbidden"}] {
  data.inventory.namespace[input.review.object.metadata.namespace]["v1"]["ConfigMap"]["forbidden"].data[input.review.object.metadata.name]
}
`

func constraint(name string, max int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "constraints.gatekeeper.sh/v1beta1",
		"kind":       "Limited",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"parameters": map[string]any{"max": max}},
	}}
}

func configMap(ns, name string, keys ...string) *unstructured.Unstructured {
	data := map[string]any{}
	for _, k := range keys {
		data[k] = "x"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data":     data,
	}}
}

func newClient(t *testing.T) *constraintclient.Client {
	t.Helper()
	c, err := constraintclient.NewClient(
		constraintclient.Targets(&target.K8sValidationTarget{}),
		constraintclient.Driver(preparedrego.New()),
		constraintclient.EnforcementPoints(util.AuditEnforcementPoint),
	)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func messages(t *testing.T, c *constraintclient.Client, obj *unstructured.Unstructured) []string {
	t.Helper()
	resp, err := c.Review(context.Background(), target.AugmentedUnstructured{Object: *obj})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range resp.Results() {
		out = append(out, r.Constraint.GetName()+": "+r.Msg)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The prepared query reads what changes after it was prepared: each
// constraint's parameters, constraints added and removed, synced data; and a
// template's new version replaces the old one's query.
func TestPreparedQueriesReadTheCurrentConstraintsAndData(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	if _, err := c.AddTemplate(ctx, limitedTemplate(limitedRego)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddConstraint(ctx, constraint("two", 2)); err != nil {
		t.Fatal(err)
	}
	three := configMap("team-a", "cm", "a", "b", "c")
	if got, want := messages(t, c, three), []string{"two: 3 keys, at most 2"}; !equal(got, want) {
		t.Errorf("one constraint: %q, want %q", got, want)
	}

	if _, err := c.AddConstraint(ctx, constraint("one", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddConstraint(ctx, constraint("two", 5)); err != nil {
		t.Fatal(err)
	}
	if got, want := messages(t, c, three), []string{"one: 3 keys, at most 1"}; !equal(got, want) {
		t.Errorf("after adding one and raising two: %q, want %q", got, want)
	}

	forbidden := configMap("team-a", "forbidden", "cm")
	if _, err := c.AddData(ctx, forbidden); err != nil {
		t.Fatal(err)
	}
	if got, want := messages(t, c, three), []string{"one: 3 keys, at most 1", "one: forbidden", "two: forbidden"}; !equal(got, want) {
		t.Errorf("with the inventory: %q, want %q", got, want)
	}
	if _, err := c.RemoveData(ctx, forbidden); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RemoveConstraint(ctx, constraint("one", 1)); err != nil {
		t.Fatal(err)
	}
	if got := messages(t, c, three); len(got) != 0 {
		t.Errorf("after removing one and the data: %q, want none", got)
	}

	// A new version of the template replaces the query.
	v2 := limitedTemplate(limitedRego + "\nviolation[{\"msg\": \"v2\"}] { true }\n")
	if _, err := c.AddTemplate(ctx, v2); err != nil {
		t.Fatal(err)
	}
	if got, want := messages(t, c, three), []string{"two: v2"}; !equal(got, want) {
		t.Errorf("after the template's new version: %q, want %q", got, want)
	}
}

// A template the frameworks' driver refuses is refused alike, and nothing
// of it is loaded.
func TestInvalidTemplatesAreRefused(t *testing.T) {
	for name, rego := range map[string]string{
		"no violation rule":         "package limited\n\ndeny[msg] { msg := \"x\" }\n",
		"a syntax error":            "package limited\n\nviolation[{\"msg\": m}] { m := }\n",
		"an unknown data reference": "package limited\n\nviolation[{\"msg\": \"x\"}] { data.elsewhere.x }\n",
	} {
		t.Run(name, func(t *testing.T) {
			c := newClient(t)
			_, err := c.AddTemplate(context.Background(), limitedTemplate(rego))
			if !errors.Is(err, clienterrors.ErrInvalidConstraintTemplate) {
				t.Fatalf("AddTemplate: %v, want ErrInvalidConstraintTemplate", err)
			}
			if _, err := c.AddConstraint(context.Background(), constraint("two", 2)); err == nil {
				t.Errorf("AddConstraint of the refused template's kind: no error")
			}
		})
	}
}
