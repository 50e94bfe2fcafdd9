package builtins

import (
	"errors"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/types"
)

// Names of the builtins, as Rego calls them.
const (
	ReserveName = "quota.reserve"
	UsageName   = "quota.usage"
	// OverLimitName says whether any bucket of a resource type is over its limit.
	OverLimitName = "quota.over_limit"
	QuantityName  = "quota.quantity"
	// DisplayName writes an amount in its resource type's display unit.
	DisplayName = "quota.display"
	// PolicyClaimName renders a ClaimCreationPolicy's claim for one object.
	PolicyClaimName = "quota.policy_claim"
	// PodResourcesName says what one pod of an object holds.
	PodResourcesName = "quota.pod_resources"
	// SelectsName applies a label selector to labels.
	SelectsName = "quota.selects"
)

// declarations are the builtins as OPA declares them, made afresh for each
// caller so that no package-level value holds them.
type declarations struct {
	reserve, usage, overLimit, quantity, display, policyClaim, podResources, selects, review *rego.Function
}

func declare() declarations {
	anyObject := types.NewObject(nil, types.NewDynamicProperty(types.S, types.A))
	return declarations{
		review: &rego.Function{
			Name: ReviewName,
			Description: "Decides what one review asks of quota, as lib.quota words it: the consumers of parameters.consumers, " +
				"the mode (a real admission reserves with quota.reserve, a dry run or a review without a request uid reads with quota.usage, " +
				"audit reports buckets over their limit, DELETE and CONNECT count nothing), the claim and its id, and every message. " +
				"Returns the violations, none when the review may proceed. Halts where quota.reserve, quota.usage, quota.over_limit or quota.selects would.",
			Decl: types.NewFunction(
				types.Args(
					types.Named("facts", anyObject).Description(
						"{review: input.review, parameters: input.parameters, "+
							"scale: null or, for a Scale, the workload it stands for {object, oldObject, kind: {apiGroup, kind}}, "+
							"inventoryNamespaceLabels: null or the namespace's labels in Gatekeeper's inventory (read when the review has no namespaceObject)}"),
					types.Named("counts", anyObject).Description(
						"what the object counts: {amount, oldAmount} (a number, or the reason it has none), "+
							"or {claim: {requests, metadata}}, or {growth: {requests, oldRequests, metadata}}"),
				),
				types.Named("violations", types.NewArray(nil, anyObject)).Description("[{msg, details}]"),
			),
			// Nondeterministic: it reserves and reads the ledger.
			Nondeterministic: true,
		},
		reserve: &rego.Function{
			Name: ReserveName,
			Description: "Reserves quota for a claim, all or nothing, idempotent by claim id. " +
				"Returns the decision: granted, message, and per bucket the request, reason and numbers. " +
				"Halts on invalid input or when the ledger cannot decide.",
			Decl: types.NewFunction(
				types.Args(types.Named("claim", anyObject).Description(
					"{id, object: {apiGroup, kind, namespace, name, uid}, requests: [{consumer: {apiGroup, kind, name, namespace}, resourceType, amount, dimensions}], "+
						"metadata: {name, generateName, namespace, labels, annotations}} (metadata names the claim's ResourceClaim view; optional)")),
				types.Named("decision", anyObject).Description(
					"{id, granted, message, requests: [{consumer, resourceType, dimensions, amount, bucket, granted, reason, limit, allocated, reserved, available, message, units, effectiveResourceGrant}]} "+
						"(units: {baseUnit, displayUnit, unitConversionFactor} of the resource type's registration, {} when unknown; "+
						"effectiveResourceGrant: the name of the consumer's EffectiveResourceGrant for the resource type)"),
			),
			// Nondeterministic: the result depends on ledger state, so partial
			// evaluation must never fold a call into a constant.
			Nondeterministic: true,
		},
		usage: &rego.Function{
			Name:        UsageName,
			Description: "Reads one bucket's numbers without writing. Halts on invalid input or when the ledger cannot be read.",
			Decl: types.NewFunction(
				types.Args(types.Named("query", anyObject).Description(
					"{consumer: {apiGroup, kind, name, namespace}, resourceType, dimensions}")),
				types.Named("usage", anyObject).Description("{bucket, limit, allocated, reserved, available, units, effectiveResourceGrant} (as in quota.reserve's requests)"),
			),
			Nondeterministic: true,
		},
		overLimit: &rego.Function{
			Name: OverLimitName,
			Description: "Whether any bucket of the resource type holds more than its limit (allocated plus reserved), from an index: " +
				"audit asks it before working out an object's buckets. True when the ledger cannot tell (so callers look at each bucket); halts when it is not ready.",
			Decl: types.NewFunction(
				types.Args(types.Named("resourceType", types.S).Description("a registered resource type, e.g. core/configmaps")),
				types.Named("over", types.B).Description("false only when no bucket of the resource type is over its limit"),
			),
			Nondeterministic: true,
		},
		quantity: &rego.Function{
			Name: QuantityName,
			Description: "Converts a Kubernetes quantity (\"500m\", \"2\", \"1Gi\") into a whole number of unit " +
				"(a quantity suffix: \"\" for ones, \"m\", \"k\", \"Mi\", ...), rounding up. Halts on unparsable, negative or int64-overflowing input.",
			Decl: types.NewFunction(
				types.Args(
					types.Named("value", types.NewAny(types.S, types.N)).Description("a quantity string or a number"),
					types.Named("unit", types.S).Description("the base unit as a quantity suffix"),
				),
				types.Named("amount", types.N).Description("the value in whole units, rounded up"),
			),
		},
		display: &rego.Function{
			Name: DisplayName,
			Description: "Writes an amount of base units in the display unit of units (as quota.reserve and quota.usage return them), exactly: " +
				"\"0.5\" for 500 at unitConversionFactor 1000, a fraction in lowest terms (\"10/3\") when the decimal would not end, " +
				"the amount itself when units declare no display unit other than the base unit. Halts on a fractional amount or malformed units.",
			Decl: types.NewFunction(
				types.Args(
					types.Named("amount", types.N).Description("a whole number of base units"),
					types.Named("units", anyObject).Description("{baseUnit, displayUnit, unitConversionFactor}"),
				),
				types.Named("display", types.S).Description("the amount in display units, without the unit's name"),
			),
		},
		policyClaim: &rego.Function{
			Name: PolicyClaimName,
			Description: "Renders what the named ClaimCreationPolicy claims for an object: its conditions and claim template in CEL, " +
				"with the variables trigger (the object), user and requestInfo (from the request). " +
				"Returns {applies: false} when the policy does not apply, {applies: true, claim: {requests, metadata}} when it does, " +
				"and {error} when it cannot decide (not found, not loaded at the generation asked for, a CEL error) " +
				"or renders a claim the object's namespace may not make (a consumer the namespace does not belong to, another namespace), " +
				"judged as the claim webhook judges a ResourceClaim in that namespace. " +
				"Halts on invalid input or when the process has no policies.",
			Decl: types.NewFunction(
				types.Args(types.Named("request", anyObject).Description(
					"{policy, generation, object, namespace: {name, labels}, request: {operation, userInfo, resource, subResource, namespace, name, dryRun}} "+
						"(namespace: the object's, or a Namespace itself; name \"\" for another cluster-scoped object; labels left out when unknown)")),
				types.Named("result", anyObject).Description(
					"{applies, claim: {requests: [{consumer, resourceType, amount, dimensions}], metadata: {name, generateName, namespace, labels, annotations}}} or {error}"),
			),
			// Nondeterministic: the result depends on the policies the process
			// holds, which change; partial evaluation must not fold it.
			Nondeterministic: true,
		},
		podResources: &rego.Function{
			Name: PodResourcesName,
			Description: "What one pod of an object holds, by Kubernetes' own rules (k8s.io/component-helpers/resource PodRequests and PodLimits, " +
				"after the API server's defaulting of a Pod): pod-level resources, requests defaulted from limits, init containers, native sidecars " +
				"and overhead. The object is a Pod, or a kind with a pod template (spec.template, a CronJob's spec.jobTemplate, a PodTemplate's template). " +
				"Returns {error} when the object has no pod spec or it is not one; halts when the argument is not an object.",
			Decl: types.NewFunction(
				types.Args(types.Named("object", anyObject).Description("a Pod, a workload, a CronJob or a PodTemplate")),
				types.Named("resources", anyObject).Description("{requests: {name: quantity}, limits: {name: quantity}}: quantity strings, as Kubernetes writes them; or {error}"),
			),
		},
		selects: &rego.Function{
			Name: SelectsName,
			Description: "Whether a Kubernetes label selector ({matchLabels, matchExpressions}, metav1.LabelSelector) selects the labels, " +
				"by apimachinery's rules (an empty selector selects everything). Halts on a malformed selector or labels that are not strings.",
			Decl: types.NewFunction(
				types.Args(
					types.Named("selector", anyObject).Description("{matchLabels: {key: value}, matchExpressions: [{key, operator, values}]}"),
					types.Named("labels", anyObject).Description("an object's metadata.labels"),
				),
				types.Named("selected", types.B).Description("true when the selector selects the labels"),
			),
		},
	}
}

// all lists every declaration.
func (d declarations) all() []*rego.Function {
	return []*rego.Function{d.reserve, d.usage, d.overLimit, d.quantity, d.display, d.policyClaim, d.podResources, d.selects, d.review}
}

// Register declares the quota builtins in OPA's global builtin table and
// registers their implementations there, as OPA requires: the frameworks
// rego driver (Gatekeeper's) evaluates with OPA's table and takes no
// functions of its own, and copies the declarations into its capabilities
// when it is built, so call Register before creating any Rego compiler or
// driver. A process calls it once; a second call returns an error (OPA would
// declare every builtin twice).
//
// The implementations decide against the Env of each evaluation's context
// (WithEnv) or, when it carries none, against process() (nil, or returning
// nil: no Env, and the calls that need one halt). process is how a hosting
// process hands over the Env of evaluations it cannot give a context to:
// the OPA CLI's, Gatekeeper's audit.
func Register(process func() *Env) error {
	d := declare()
	if _, done := ast.BuiltinMap[d.reserve.Name]; done {
		return errors.New("the quota builtins are already registered: a process registers them once")
	}
	e := envs{process: process}
	rego.RegisterBuiltin1(d.reserve, func(bctx rego.BuiltinContext, a *ast.Term) (*ast.Term, error) {
		return reserve(e.of(bctx), bctx, a)
	})
	rego.RegisterBuiltin1(d.usage, func(bctx rego.BuiltinContext, a *ast.Term) (*ast.Term, error) {
		return usage(e.of(bctx), bctx, a)
	})
	rego.RegisterBuiltin1(d.overLimit, func(bctx rego.BuiltinContext, a *ast.Term) (*ast.Term, error) {
		return overLimit(e.of(bctx), bctx, a)
	})
	rego.RegisterBuiltin1(d.policyClaim, func(bctx rego.BuiltinContext, a *ast.Term) (*ast.Term, error) {
		return policyClaim(e.of(bctx), bctx, a)
	})
	rego.RegisterBuiltin2(d.review, func(bctx rego.BuiltinContext, a, b *ast.Term) (*ast.Term, error) {
		return review(e.of(bctx), bctx, a, b)
	})
	rego.RegisterBuiltin2(d.quantity, quantity)
	rego.RegisterBuiltin2(d.display, display)
	rego.RegisterBuiltin1(d.podResources, podResources)
	rego.RegisterBuiltin2(d.selects, selects)
	return nil
}

// Capabilities returns OPA's capabilities for this version plus the quota
// builtins' declarations, whether or not Register was called, so that
// `opa check`/`opa test --capabilities` and editors can type-check policies
// that call them. quotactl capabilities prints it as rego/capabilities.json.
func Capabilities() *ast.Capabilities {
	ours := declare().all()
	c := ast.CapabilitiesForThisVersion()
	c.Builtins = slices.DeleteFunc(c.Builtins, func(b *ast.Builtin) bool {
		return slices.ContainsFunc(ours, func(f *rego.Function) bool { return f.Name == b.Name })
	})
	for _, f := range ours {
		c.Builtins = append(c.Builtins, &ast.Builtin{
			Name:             f.Name,
			Description:      f.Description,
			Decl:             f.Decl,
			Nondeterministic: f.Nondeterministic,
		})
	}
	slices.SortFunc(c.Builtins, func(a, b *ast.Builtin) int { return strings.Compare(a.Name, b.Name) })
	return c
}
