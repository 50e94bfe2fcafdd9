package builtins

import (
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The object comes from Rego, where a pod spec's numbers
// (terminationGracePeriodSeconds, ports) are JSON numbers; a Deployment
// with them was once refused as "not a pod spec" (found by the e2e suite).
func TestPodResourcesOfARegoObject(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"kind": "Deployment", "spec": {"replicas": 4, "template": {"spec": {"terminationGracePeriodSeconds": 30,
			"containers": [{"name": "app", "ports": [{"containerPort": 8080}], "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]}}}}`,
			`{"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}`},
		{`{"kind": "ConfigMap", "data": {"a": "b"}}`,
			`{"error": "no pod template: looked at spec.jobTemplate.spec.template.spec, spec.template.spec and template.spec (a Pod's own spec for kind Pod)"}`},
	} {
		got, err := podResourcesOf(ast.MustParseTerm(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if want := ast.MustParseTerm(tc.want); !got.Equal(want) {
			t.Errorf("quota.pod_resources(%s)\n got %v\nwant %v", tc.in, got, want)
		}
	}
	if _, err := podResourcesOf(ast.StringTerm("web")); err == nil || err.Error() != "object: must be an object, got string" {
		t.Errorf("a string: %v, want a halt saying it must be an object", err)
	}
}
