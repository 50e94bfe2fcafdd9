package builtins

// quota.policy_claim: what a ClaimCreationPolicy claims for one object, for
// the QuotaClaimPolicy template, which reserves it through lib.quota.

import (
	"errors"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/celpolicy"
	"github.com/quotakeeper/quotakeeper/internal/claimpolicies"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
)

var errNoPolicies = errors.New("no ClaimCreationPolicies configured: the hosting process must set them in the builtins' Env (Env.ClaimPolicies)")

// policyClaim implements quota.policy_claim(request) with env's
// ClaimCreationPolicies.
//
// A policy that cannot decide (not found, not loaded at the constraint's
// generation, or a CEL error for this object) is an answer, {"error": msg},
// not a halt: the template turns it into a violation of its own constraint.
// A halt would stop the whole evaluation of the template's constraints, and
// Gatekeeper's driver would give every constraint of the kind (every
// ClaimCreationPolicy) that one message, dropping the claims of the others
// (which the observer must still count). What halts is what no policy can
// answer: invalid input, no policies configured, a failed cache read.
//
// Its halts outside an observation are counted (package metrics).
func policyClaim(env *Env, bctx rego.BuiltinContext, arg *ast.Term) (*ast.Term, error) {
	observing := recorderFrom(bctx) != nil
	halt := func(cause string, err error) (*ast.Term, error) {
		if !observing {
			metrics.Halted(PolicyClaimName, cause, false)
		}
		return nil, err
	}
	req, err := decodePolicyRequest(arg)
	if err != nil {
		return halt(metrics.CauseInvalidInput, err)
	}
	var set *claimpolicies.Set
	if env != nil {
		set = env.ClaimPolicies
	}
	if set == nil {
		return halt(metrics.CauseNotReady, rego.NewHaltError(errNoPolicies))
	}
	claim, err := set.Claim(bctx.Context, req.policy, req.generation, req.input, req.namespace)
	if err != nil {
		if perr, ok := errors.AsType[*claimpolicies.Error](err); ok {
			return toTerm(map[string]any{"error": perr.Error()})
		}
		return halt(metrics.CausePolicyError, rego.NewHaltError(err))
	}
	if claim == nil {
		return toTerm(map[string]any{"applies": false})
	}
	return toTerm(map[string]any{"applies": true, "claim": renderedClaimJSON(claim)})
}

type policyRequest struct {
	policy     string
	generation int64
	input      celpolicy.ClaimInput
	namespace  claimpolicies.Namespace
}

// decodePolicyRequest reads {policy, generation, object, namespace,
// request}. namespace is {name, labels} of the object's namespace (a
// Namespace's own; name "" for another cluster-scoped object), labels left
// out when they are unknown: the rendered claim is judged against it as a
// ResourceClaim in that namespace would be (claimpolicies.Namespace). request
// is input.review's operation, userInfo, resource, subResource, namespace,
// name and dryRun, from which the CEL variables user and requestInfo are
// made with every field present (an absent one is empty), so that a policy
// reads them alike at admission, in audit and in the observer, which have
// no requester.
func decodePolicyRequest(arg *ast.Term) (policyRequest, error) {
	var d decoder
	obj, ok := arg.Value.(ast.Object)
	if !ok {
		d.fail("request", "must be an object, got %s", ast.ValueName(arg.Value))
		return policyRequest{}, d.err()
	}
	var out policyRequest
	obj.Foreach(func(k, v *ast.Term) {
		key, _ := k.Value.(ast.String)
		switch path := "request." + string(key); key {
		case "policy":
			if s, ok := v.Value.(ast.String); ok && s != "" {
				out.policy = string(s)
			} else {
				d.fail(path, "must be a non-empty string, got %s", v)
			}
		case "generation":
			n, ok := v.Value.(ast.Number)
			g, isInt := n.Int64()
			if !ok || !isInt || g < 0 {
				d.fail(path, "must be a whole number, at least 0, got %s", v)
			}
			out.generation = g
		case "object":
			out.input.Trigger = d.goObject(path, v.Value)
		case "namespace":
			j, err := ast.JSON(v.Value)
			if err != nil {
				d.fail(path, "%v", err)
				return
			}
			out.namespace = d.namespace(path, j)
		case "request":
			review := d.goObject(path, v.Value)
			out.input.User, out.input.RequestInfo = requestVariables(review)
		default:
			d.fail(path, "unknown field (allowed: policy, generation, object, namespace, request)")
		}
	})
	if out.policy == "" && obj.Get(ast.StringTerm("policy")) == nil {
		d.fail("request.policy", "required")
	}
	if out.input.Trigger == nil && obj.Get(ast.StringTerm("object")) == nil {
		d.fail("request.object", "required")
	}
	if obj.Get(ast.StringTerm("namespace")) == nil {
		d.fail("request.namespace", "required")
	}
	if out.input.User == nil {
		out.input.User, out.input.RequestInfo = requestVariables(nil)
	}
	return out, d.err()
}

// namespace reads {name, labels}: name a string ("" for a cluster-scoped
// object), labels an object of strings, left out when unknown.
func (d *decoder) namespace(path string, v any) claimpolicies.Namespace {
	m := d.object(path, v, "name", "labels")
	if m == nil {
		return claimpolicies.Namespace{}
	}
	d.required(path, m, "name")
	_, known := m["labels"]
	return claimpolicies.Namespace{Name: d.str(path, m, "name"), Labels: d.stringMap(path, m, "labels"), Known: known}
}

// requestVariables are the CEL variables user and requestInfo of an
// admission review (as a map).
func requestVariables(review map[string]any) (user, requestInfo map[string]any) {
	u, _ := review["userInfo"].(map[string]any)
	user = map[string]any{
		"username": stringOr(u["username"]),
		"uid":      stringOr(u["uid"]),
		"groups":   listOr(u["groups"]),
		"extra":    mapOr(u["extra"]),
	}
	res, _ := review["resource"].(map[string]any)
	dryRun, _ := review["dryRun"].(bool)
	requestInfo = map[string]any{
		"operation": stringOr(review["operation"]),
		"resource": map[string]any{
			"group": stringOr(res["group"]), "version": stringOr(res["version"]), "resource": stringOr(res["resource"]),
		},
		"subResource": stringOr(review["subResource"]),
		"namespace":   stringOr(review["namespace"]),
		"name":        stringOr(review["name"]),
		"dryRun":      dryRun,
	}
	return user, requestInfo
}

func stringOr(v any) string { s, _ := v.(string); return s }

func listOr(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{}
}

func mapOr(v any) map[string]any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

// goObject converts a Rego object to the Go shapes CEL reads (as
// unstructured content): whole numbers int64, others float64.
func (d *decoder) goObject(path string, v ast.Value) map[string]any {
	g, err := goValue(v)
	if err != nil {
		d.fail(path, "%v", err)
		return nil
	}
	m, ok := g.(map[string]any)
	if !ok {
		d.fail(path, "must be an object, got %s", ast.ValueName(v))
		return nil
	}
	return m
}

func goValue(v ast.Value) (any, error) {
	switch x := v.(type) {
	case ast.Null:
		return nil, nil
	case ast.Boolean:
		return bool(x), nil
	case ast.String:
		return string(x), nil
	case ast.Number:
		if i, ok := x.Int64(); ok {
			return i, nil
		}
		f, ok := x.Float64()
		if !ok {
			return nil, fmt.Errorf("number %s is out of range", x)
		}
		return f, nil
	case *ast.Array:
		out := make([]any, 0, x.Len())
		var err error
		x.Foreach(func(t *ast.Term) {
			if err != nil {
				return
			}
			var g any
			g, err = goValue(t.Value)
			out = append(out, g)
		})
		return out, err
	case ast.Object:
		out := make(map[string]any, x.Len())
		var err error
		x.Foreach(func(k, t *ast.Term) {
			if err != nil {
				return
			}
			key, ok := k.Value.(ast.String)
			if !ok {
				err = fmt.Errorf("object key %s is not a string", k)
				return
			}
			out[string(key)], err = goValue(t.Value)
		})
		return out, err
	case ast.Set:
		return goValue(x.Sorted())
	default:
		return nil, fmt.Errorf("unsupported value %s", ast.ValueName(v))
	}
}

// renderedClaimJSON is a rendered claim as quota.reserve's argument wants
// it: the requests, each naming the claim's consumer, and the metadata of
// its view (only the fields the policy set).
func renderedClaimJSON(c *quotav1alpha1.ResourceClaim) map[string]any {
	consumer := map[string]any{
		"apiGroup": c.Spec.ConsumerRef.APIGroup, "kind": c.Spec.ConsumerRef.Kind,
		"name": c.Spec.ConsumerRef.Name, "namespace": c.Spec.ConsumerRef.Namespace,
	}
	requests := make([]any, len(c.Spec.Requests))
	for i, r := range c.Spec.Requests {
		requests[i] = map[string]any{
			"consumer":     consumer,
			"resourceType": r.ResourceType,
			"amount":       r.Amount,
			"dimensions":   dimensionsJSON(r.Dimensions),
		}
	}
	md := map[string]any{}
	for k, v := range map[string]string{"name": c.Name, "generateName": c.GenerateName, "namespace": c.Namespace} {
		if v != "" {
			md[k] = v
		}
	}
	for k, v := range map[string]map[string]string{"labels": c.Labels, "annotations": c.Annotations} {
		if len(v) > 0 {
			m := make(map[string]any, len(v))
			for key, val := range v {
				m[key] = val
			}
			md[k] = m
		}
	}
	return map[string]any{"requests": requests, "metadata": md}
}
