package builtins

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// What quota.review reads of lib.quota's argument: the facts it decides on.
func TestReviewFacts(t *testing.T) {
	const configMap = `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-1", "namespace": "team-a", "uid": "u-1",
		"generation": 0, "labels": {"app": "web"}, "annotations": {"big": "not read"}, "managedFields": []}, "data": {"k": "v"}}`
	const teamA = `{"metadata": {"name": "team-a", "labels": {"quota.miloapis.com/organization": "acme"}}}`
	tests := []struct {
		name, arg string
		want      string
	}{{
		name: "a create with the namespace object Gatekeeper attaches",
		arg: `{"review": {"operation": "CREATE", "uid": "req-1", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
			"name": "cm-1", "namespace": "team-a", "object": ` + configMap + `, "oldObject": null, "namespaceObject": ` + teamA + `},
			"parameters": {"resourceType": "core/configmaps"}, "scale": null, "inventoryNamespaceLabels": null}`,
		want: `{"operation": "CREATE", "requestUID": "req-1", "dryRun": false, "kind": {"apiGroup": "", "kind": "ConfigMap"},
			"object": {"name": "cm-1", "namespace": "team-a", "uid": "u-1", "generation": 0, "labels": {"app": "web"}},
			"oldLabels": {}, "namespace": "team-a", "namespaceLabels": {"quota.miloapis.com/organization": "acme"},
			"reviewNamespace": "team-a", "reviewName": "cm-1", "parameters": {"resourceType": "core/configmaps"}}`,
	}, {
		name: "an update's old labels, a dry run, the inventory's namespace labels",
		arg: `{"review": {"operation": "UPDATE", "uid": "req-2", "dryRun": true, "kind": {"group": "apps", "kind": "Deployment"},
			"name": "web", "namespace": "team-a", "object": {"metadata": {"name": "web", "namespace": "team-a", "generation": 3}},
			"oldObject": {"metadata": {"labels": {"tier": "old"}}}},
			"parameters": {}, "scale": null, "inventoryNamespaceLabels": {"team": "a"}}`,
		want: `{"operation": "UPDATE", "requestUID": "req-2", "dryRun": true, "kind": {"apiGroup": "apps", "kind": "Deployment"},
			"object": {"name": "web", "namespace": "team-a", "generation": 3}, "oldLabels": {"tier": "old"},
			"namespace": "team-a", "namespaceLabels": {"team": "a"}, "reviewNamespace": "team-a", "reviewName": "web", "parameters": {}}`,
	}, {
		name: "the namespace unknown to the review and the inventory",
		arg: `{"review": {"operation": "CREATE", "kind": {"kind": "ConfigMap"}, "namespace": "team-b", "object": {"metadata": {"name": "x"}}},
			"parameters": {}, "scale": null, "inventoryNamespaceLabels": null}`,
		want: `{"operation": "CREATE", "requestUID": "", "dryRun": false, "kind": {"apiGroup": "", "kind": "ConfigMap"},
			"object": {"name": "x"}, "oldLabels": {}, "namespace": "team-b", "namespaceLabels": null,
			"reviewNamespace": "team-b", "reviewName": "", "parameters": {}}`,
	}, {
		name: "a namespace object of another namespace is not this one's",
		arg: `{"review": {"operation": "CREATE", "kind": {"kind": "ConfigMap"}, "namespace": "team-b",
			"object": {"metadata": {"name": "x", "namespace": "team-b"}}, "namespaceObject": ` + teamA + `},
			"parameters": {}, "scale": null, "inventoryNamespaceLabels": null}`,
		want: `{"operation": "CREATE", "requestUID": "", "dryRun": false, "kind": {"apiGroup": "", "kind": "ConfigMap"},
			"object": {"name": "x", "namespace": "team-b"}, "oldLabels": {}, "namespace": "team-b", "namespaceLabels": null,
			"reviewNamespace": "team-b", "reviewName": "", "parameters": {}}`,
	}, {
		name: "a Namespace counts against itself, with its own labels",
		arg: `{"review": {"operation": "CREATE", "uid": "req-3", "kind": {"group": "", "kind": "Namespace"}, "name": "team-c",
			"object": {"metadata": {"name": "team-c", "uid": "u-3", "labels": {"org": "acme"}}}},
			"parameters": {}, "scale": null, "inventoryNamespaceLabels": {"stale": "copy"}}`,
		want: `{"operation": "CREATE", "requestUID": "req-3", "dryRun": false, "kind": {"apiGroup": "", "kind": "Namespace"},
			"object": {"name": "team-c", "uid": "u-3", "labels": {"org": "acme"}}, "oldLabels": {}, "namespace": "team-c",
			"namespaceLabels": {"org": "acme"}, "reviewNamespace": "", "reviewName": "team-c", "parameters": {}}`,
	}, {
		name: "a Scale is reviewed as the workload it stands for",
		arg: `{"review": {"operation": "UPDATE", "uid": "req-4", "kind": {"group": "autoscaling", "kind": "Scale"}, "name": "web",
			"namespace": "team-a", "object": {"metadata": {"name": "web", "namespace": "team-a", "uid": "u-4"}, "spec": {"replicas": 3}},
			"namespaceObject": ` + teamA + `},
			"parameters": {}, "inventoryNamespaceLabels": null,
			"scale": {"kind": {"apiGroup": "apps", "kind": "Deployment"},
				"object": {"metadata": {"name": "web", "namespace": "team-a", "uid": "u-4", "generation": 8, "labels": {"app": "web"}}},
				"oldObject": {"metadata": {"labels": {"app": "web"}}}}}`,
		want: `{"operation": "UPDATE", "requestUID": "req-4", "dryRun": false, "kind": {"apiGroup": "apps", "kind": "Deployment"},
			"object": {"name": "web", "namespace": "team-a", "uid": "u-4", "generation": 8, "labels": {"app": "web"}},
			"oldLabels": {"app": "web"}, "namespace": "team-a", "namespaceLabels": {"quota.miloapis.com/organization": "acme"},
			"reviewNamespace": "team-a", "reviewName": "web", "parameters": {}}`,
	}, {
		name: "audit: no operation, the object only",
		arg:  `{"review": {"kind": {"kind": "ConfigMap"}, "object": ` + configMap + `}, "parameters": {"consumers": []}}`,
		want: `{"operation": "", "requestUID": "", "dryRun": false, "kind": {"apiGroup": "", "kind": "ConfigMap"},
			"object": {"name": "cm-1", "namespace": "team-a", "uid": "u-1", "generation": 0, "labels": {"app": "web"}},
			"oldLabels": {}, "namespace": "team-a", "namespaceLabels": null,
			"reviewNamespace": "", "reviewName": "", "parameters": {"consumers": []}}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := reviewFacts(ast.MustParseTerm(tt.arg))
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			d := json.NewDecoder(strings.NewReader(tt.want))
			d.UseNumber()
			if err := d.Decode(&want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				t.Errorf("facts\n got %s\nwant %s", g, tt.want)
			}
		})
	}
}

// A malformed argument halts with what is wrong with it.
func TestReviewFactsRejects(t *testing.T) {
	for arg, want := range map[string]string{
		`"facts"`: `facts: must be an object, got string`,
		`{"review": {}, "parameters": {}, "object": {}}`: `facts: unknown field "object"`,
		`{"parameters": {}}`:                             `facts.review: must be an object, got nothing`,
		`{"review": [], "parameters": {}}`:               `facts.review: must be an object, got array`,
	} {
		_, err := reviewFacts(ast.MustParseTerm(arg))
		if err == nil || err.Error() != want {
			t.Errorf("reviewFacts(%s): error %v, want %q", arg, err, want)
		}
	}
}
