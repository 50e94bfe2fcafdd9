package builtins

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// ReviewRead is what quota.review reads of input.review: fields, and of
// the objects their metadata's metadata fields. The External Data twin of a
// template sends the provider only these (rego.ExternalDataLib), not the
// object: a key holds its arguments, and Gatekeeper caches responses by key.
func ReviewRead() (fields, objects, metadata []string) {
	return []string{"operation", "uid", "dryRun", "kind", "name", "namespace"},
		[]string{"object", "oldObject", "namespaceObject"},
		[]string{"uid", "name", "namespace", "generation", "labels"}
}

// reviewFacts reads quota.review's first argument, as lib.quota passes it:
//
//	{review: input.review, parameters: input.parameters,
//	 scale: null | {object, oldObject, kind: {apiGroup, kind}},
//	 inventoryNamespaceLabels: null | {...}}
//
// into the facts a reviewer decides on. The review is read in place (OPA's
// values, not converted): the reviewed object may be large and only its
// metadata matters. scale is the workload a Scale stands for (lib.quota's
// "The scale subresource": only Rego reads Gatekeeper's inventory), and
// inventoryNamespaceLabels the namespace's labels from the inventory, which
// lib.quota looks up only when the review carries no namespace object.
// Gathering these facts in Rego cost more than deciding on them: issue 23's
// profiles of Gatekeeper and the observer under load.
func reviewFacts(arg *ast.Term) (map[string]any, error) {
	in, ok := arg.Value.(ast.Object)
	if !ok {
		return nil, rego.NewHaltError(fmt.Errorf("facts: must be an object, got %s", ast.ValueName(arg.Value)))
	}
	var unknown *ast.Term
	in.Foreach(func(k, _ *ast.Term) {
		switch k.Value {
		case ast.String("review"), ast.String("parameters"), ast.String("scale"), ast.String("inventoryNamespaceLabels"):
		default:
			unknown = k
		}
	})
	if unknown != nil {
		return nil, rego.NewHaltError(fmt.Errorf("facts: unknown field %s", unknown))
	}
	review, ok := valueAt(in, "review").(ast.Object)
	if !ok {
		return nil, rego.NewHaltError(fmt.Errorf("facts.review: must be an object, got %s", valueName(valueAt(in, "review"))))
	}

	obj, oldObj := valueAt(review, "object"), valueAt(review, "oldObject")
	group, kind := valueAt(review, "kind", "group"), valueAt(review, "kind", "kind")
	if scale, ok := valueAt(in, "scale").(ast.Object); ok {
		obj, oldObj = valueAt(scale, "object"), valueAt(scale, "oldObject")
		group, kind = valueAt(scale, "kind", "apiGroup"), valueAt(scale, "kind", "kind")
	}
	isNamespace := stringAt(group) == "" && stringAt(kind) == "Namespace"

	// The namespace the object counts against: a Namespace's own name, else
	// the object's namespace, else the request's.
	namespace := stringAt(valueAt(obj, "metadata", "namespace"))
	switch {
	case isNamespace:
		namespace = stringAt(valueAt(obj, "metadata", "name"))
	case namespace == "":
		namespace = stringAt(valueAt(review, "namespace"))
	}
	// Its labels: a Namespace's own; else those of the namespace object
	// Gatekeeper attaches to the review; else the inventory's; null when
	// none knows the namespace.
	labels := valueAt(in, "inventoryNamespaceLabels")
	if isNamespace {
		labels = labelsOf(obj)
	} else if ns, ok := valueAt(review, "namespaceObject").(ast.Object); ok && stringAt(valueAt(ns, "metadata", "name")) == namespace {
		labels = labelsOf(ns)
	}

	meta := ast.NewObject()
	if m, ok := valueAt(obj, "metadata").(ast.Object); ok {
		_, _, fields := ReviewRead()
		for _, k := range fields {
			if v := m.Get(ast.StringTerm(k)); v != nil {
				meta.Insert(ast.StringTerm(k), v)
			}
		}
	}
	facts := map[string]ast.Value{
		"operation":       orString(valueAt(review, "operation")),
		"requestUID":      orString(valueAt(review, "uid")),
		"dryRun":          orValue(valueAt(review, "dryRun"), ast.Boolean(false)),
		"kind":            ast.NewObject(ast.Item(ast.StringTerm("apiGroup"), ast.NewTerm(orString(group))), ast.Item(ast.StringTerm("kind"), ast.NewTerm(orString(kind)))),
		"object":          meta,
		"oldLabels":       labelsOf(oldObj),
		"namespace":       ast.String(namespace),
		"namespaceLabels": orValue(labels, ast.Null{}),
		"reviewNamespace": orString(valueAt(review, "namespace")),
		"reviewName":      orString(valueAt(review, "name")),
		"parameters":      orValue(valueAt(in, "parameters"), ast.NewObject()),
	}
	out := make(map[string]any, len(facts))
	for k, v := range facts {
		j, err := ast.JSON(v)
		if err != nil {
			return nil, rego.NewHaltError(fmt.Errorf("facts: %s: %w", k, err))
		}
		out[k] = j
	}
	return out, nil
}

// valueAt is the value at path under v, nil where v is not an object or
// lacks a key (object.get's default).
func valueAt(v ast.Value, path ...string) ast.Value {
	for _, k := range path {
		o, ok := v.(ast.Object)
		if !ok {
			return nil
		}
		t := o.Get(ast.StringTerm(k))
		if t == nil {
			return nil
		}
		v = t.Value
	}
	return v
}

// stringAt is v when it is a string, else "".
func stringAt(v ast.Value) string {
	s, _ := v.(ast.String)
	return string(s)
}

// labelsOf is the metadata.labels of o, {} when it has none.
func labelsOf(o ast.Value) ast.Value {
	return orValue(valueAt(o, "metadata", "labels"), ast.NewObject())
}

func orString(v ast.Value) ast.Value { return orValue(v, ast.String("")) }

func orValue(v, def ast.Value) ast.Value {
	if v == nil {
		return def
	}
	return v
}

func valueName(v ast.Value) string {
	if v == nil {
		return "nothing"
	}
	return ast.ValueName(v)
}
