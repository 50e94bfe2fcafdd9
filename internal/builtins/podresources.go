package builtins

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	corev1 "k8s.io/api/core/v1"

	"github.com/quotakeeper/quotakeeper/internal/podresources"
)

// podResources implements quota.pod_resources(object): what one pod of the
// object holds, by Kubernetes' own rules (package podresources), as
// {"requests": {name: quantity}, "limits": {name: quantity}}, or {"error":
// msg} for an object without a readable pod spec: the library turns that
// into a denial where an amount is needed, and a template that computes an
// amount it then does not use (a Scale it does not check) is not halted by
// it. The Rego library converts a quantity with quota.quantity, so the
// same object counts the same at admission and in the observer, and as
// much as the scheduler and in-tree ResourceQuota say its pods hold.
func podResources(bctx rego.BuiltinContext, objTerm *ast.Term) (*ast.Term, error) {
	return invalidInputHalts(bctx, PodResourcesName)(podResourcesOf(objTerm))
}

func podResourcesOf(objTerm *ast.Term) (*ast.Term, error) {
	v, err := toJSON("object", objTerm)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, rego.NewHaltError(fmt.Errorf("object: must be an object, got %s", typeName(v)))
	}
	r, err := podresources.Of(obj)
	if err != nil {
		return ast.NewTerm(ast.MustInterfaceToValue(map[string]any{"error": err.Error()})), nil
	}
	return ast.NewTerm(ast.MustInterfaceToValue(map[string]any{
		"requests": quantitiesJSON(r.Requests),
		"limits":   quantitiesJSON(r.Limits),
	})), nil
}

func quantitiesJSON(l corev1.ResourceList) map[string]any {
	out := make(map[string]any, len(l))
	for name, q := range l {
		out[string(name)] = q.String()
	}
	return out
}
