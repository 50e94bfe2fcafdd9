package builtins

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
)

// usage implements quota.usage(query). It never writes: it is what audit and
// dry-run requests use, which must not hold quota.
//
// Its halts outside an observation are counted (package metrics); they are
// not admission decisions.
func usage(env *Env, bctx rego.BuiltinContext, arg *ast.Term) (*ast.Term, error) {
	observing := recorderFrom(bctx) != nil
	halt := func(cause string, err error) (*ast.Term, error) {
		if !observing {
			metrics.Halted(UsageName, cause, false)
		}
		return nil, err
	}
	key, err := decodeQuery(arg)
	if err != nil {
		return halt(metrics.CauseInvalidInput, err)
	}
	if observing {
		return toTerm(observedUsage(key))
	}
	l, err := env.readyLedger()
	if err != nil {
		return halt(metrics.CauseNotReady, err)
	}
	u, err := l.Usage(bctx.Context, key)
	if err != nil {
		return halt(metrics.CauseLedgerError, rego.NewHaltError(fmt.Errorf("reading bucket %s: %w", key.Name(), err)))
	}
	return toTerm(map[string]any{
		"bucket":    key.Name(),
		"limit":     u.Limit,
		"allocated": u.Allocated,
		"reserved":  u.Reserved,
		"available": u.Available,
		"units":     env.units(key.ResourceType),
		// As quota.reserve's requests: a denial names the object that shows
		// the numbers.
		"effectiveResourceGrant": effectiveGrantName(key.Consumer, key.ResourceType),
	})
}

func decodeQuery(arg *ast.Term) (ledger.BucketKey, error) {
	v, err := toJSON("query", arg)
	if err != nil {
		return ledger.BucketKey{}, err
	}
	var d decoder
	m := d.object("query", v, "consumer", "resourceType", "dimensions")
	if m == nil {
		return ledger.BucketKey{}, d.err()
	}
	c := d.consumer("query", m)
	resourceType := d.requiredString("query", m, "resourceType")
	dims := d.labels("query", m, "dimensions")
	if err := d.err(); err != nil {
		return ledger.BucketKey{}, err
	}
	return ledger.NewBucketKey(c, resourceType, dims), nil
}

// overLimit implements quota.over_limit(resourceType). In an observation it
// says yes: the observer never audits, and yes is always safe.
func overLimit(env *Env, bctx rego.BuiltinContext, arg *ast.Term) (*ast.Term, error) {
	rt, ok := arg.Value.(ast.String)
	if !ok || rt == "" {
		metrics.Halted(OverLimitName, metrics.CauseInvalidInput, false)
		return nil, rego.NewHaltError(fmt.Errorf("resourceType must be a non-empty string, got %v", arg))
	}
	if recorderFrom(bctx) != nil {
		return ast.BooleanTerm(true), nil
	}
	l, err := env.readyLedger()
	if err != nil {
		metrics.Halted(OverLimitName, metrics.CauseNotReady, false)
		return nil, err
	}
	over, err := l.AnyOverLimit(bctx.Context, string(rt))
	if err != nil {
		// Audit then looks at each of the object's buckets: slower, never wrong.
		return ast.BooleanTerm(true), nil
	}
	return ast.BooleanTerm(over), nil
}
