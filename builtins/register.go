package builtins

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/types"

	"github.com/quotakeeper/quotakeeper/ledger"
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

var anyObject = types.NewObject(nil, types.NewDynamicProperty(types.S, types.A))

var (
	reserveFunction = &rego.Function{
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
	}
	usageFunction = &rego.Function{
		Name:        UsageName,
		Description: "Reads one bucket's numbers without writing. Halts on invalid input or when the ledger cannot be read.",
		Decl: types.NewFunction(
			types.Args(types.Named("query", anyObject).Description(
				"{consumer: {apiGroup, kind, name, namespace}, resourceType, dimensions}")),
			types.Named("usage", anyObject).Description("{bucket, limit, allocated, reserved, available, units, effectiveResourceGrant} (as in quota.reserve's requests)"),
		),
		Nondeterministic: true,
	}
	overLimitFunction = &rego.Function{
		Name: OverLimitName,
		Description: "Whether any bucket of the resource type holds more than its limit (allocated plus reserved), from an index: " +
			"audit asks it before working out an object's buckets. True when the ledger cannot tell (so callers look at each bucket); halts when it is not ready.",
		Decl: types.NewFunction(
			types.Args(types.Named("resourceType", types.S).Description("a registered resource type, e.g. core/configmaps")),
			types.Named("over", types.B).Description("false only when no bucket of the resource type is over its limit"),
		),
		Nondeterministic: true,
	}
	quantityFunction = &rego.Function{
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
	}
	displayFunction = &rego.Function{
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
	}
	policyClaimFunction = &rego.Function{
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
	}
	podResourcesFunction = &rego.Function{
		Name: PodResourcesName,
		Description: "What one pod of an object holds, by Kubernetes' own rules (k8s.io/component-helpers/resource PodRequests and PodLimits, " +
			"after the API server's defaulting of a Pod): pod-level resources, requests defaulted from limits, init containers, native sidecars " +
			"and overhead. The object is a Pod, or a kind with a pod template (spec.template, a CronJob's spec.jobTemplate, a PodTemplate's template). " +
			"Returns {error} when the object has no pod spec or it is not one; halts when the argument is not an object.",
		Decl: types.NewFunction(
			types.Args(types.Named("object", anyObject).Description("a Pod, a workload, a CronJob or a PodTemplate")),
			types.Named("resources", anyObject).Description("{requests: {name: quantity}, limits: {name: quantity}}: quantity strings, as Kubernetes writes them; or {error}"),
		),
	}
	selectsFunction = &rego.Function{
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
	}
	functions = []*rego.Function{reserveFunction, usageFunction, overLimitFunction, quantityFunction, displayFunction, policyClaimFunction, podResourcesFunction, selectsFunction}
)

var registerOnce sync.Once

// Register adds the quota builtins to OPA's global builtin table. Call it
// before creating any Rego compiler or driver; calling it again does nothing
// (registering twice would declare every builtin twice).
func Register() {
	registerOnce.Do(func() {
		rego.RegisterBuiltin1(reserveFunction, reserve)
		rego.RegisterBuiltin1(usageFunction, usage)
		rego.RegisterBuiltin1(overLimitFunction, overLimit)
		rego.RegisterBuiltin2(quantityFunction, quantity)
		rego.RegisterBuiltin2(displayFunction, display)
		rego.RegisterBuiltin1(policyClaimFunction, policyClaim)
		rego.RegisterBuiltin1(podResourcesFunction, podResources)
		rego.RegisterBuiltin2(selectsFunction, selects)
	})
}

var current atomic.Pointer[ledger.Ledger]

// Use makes l the ledger behind the builtins; nil unsets it, after which
// every call halts. Evaluations already running keep the ledger they started
// with.
func Use(l *ledger.Ledger) { current.Store(l) }

var errNoLedger = errors.New("quota is not ready: the plugin has not loaded the ResourceGrants yet (it decides nothing until it has; see docs/troubleshooting.md)")

func currentLedger() (*ledger.Ledger, error) {
	l := current.Load()
	if l == nil {
		return nil, rego.NewHaltError(errNoLedger)
	}
	return l, nil
}

// Capabilities returns OPA's capabilities for this version plus the quota
// builtins' declarations, whether or not Register was called, so that
// `opa check`/`opa test --capabilities` and editors can type-check policies
// that call them. quotactl capabilities prints it as rego/capabilities.json.
func Capabilities() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	c.Builtins = slices.DeleteFunc(c.Builtins, func(b *ast.Builtin) bool { return isOurs(b.Name) })
	for _, f := range functions {
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

func isOurs(name string) bool {
	return slices.ContainsFunc(functions, func(f *rego.Function) bool { return f.Name == name })
}
