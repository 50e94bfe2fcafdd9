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
	v, err := toJSON("query", arg)
	if err != nil {
		if recorderFrom(bctx) == nil {
			metrics.Halted(UsageName, metrics.CauseInvalidInput, false)
		}
		return nil, err
	}
	u, err := bucketUsage(env, bctx, v)
	if err != nil {
		return nil, err
	}
	return toTerm(u)
}

// bucketUsage is quota.usage on its argument as a JSON value: the answer as
// quota.usage returns it. quota.review reads through it too.
func bucketUsage(env *Env, bctx rego.BuiltinContext, v any) (map[string]any, error) {
	observing := recorderFrom(bctx) != nil
	halt := func(cause string, err error) (map[string]any, error) {
		if !observing {
			metrics.Halted(UsageName, cause, false)
		}
		return nil, err
	}
	key, err := decodeQuery(v)
	if err != nil {
		return halt(metrics.CauseInvalidInput, err)
	}
	if observing {
		return observedUsage(key), nil
	}
	l, err := env.readyLedger()
	if err != nil {
		return halt(metrics.CauseNotReady, err)
	}
	u, err := l.Usage(bctx.Context, key)
	if err != nil {
		return halt(metrics.CauseLedgerError, rego.NewHaltError(fmt.Errorf("reading bucket %s: %w", key.Name(), err)))
	}
	return map[string]any{
		"bucket":    key.Name(),
		"limit":     u.Limit,
		"allocated": u.Allocated,
		"reserved":  u.Reserved,
		"available": u.Available,
		"units":     env.units(key.ResourceType),
		// As quota.reserve's requests: a denial names the object that shows
		// the numbers.
		"effectiveResourceGrant": effectiveGrantName(key.Consumer, key.ResourceType),
	}, nil
}

func decodeQuery(v any) (ledger.BucketKey, error) {
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
	over, err := anyOverLimit(env, bctx, string(rt))
	if err != nil {
		return nil, err
	}
	return ast.BooleanTerm(over), nil
}

// anyOverLimit is quota.over_limit for a non-empty resource type.
func anyOverLimit(env *Env, bctx rego.BuiltinContext, resourceType string) (bool, error) {
	if recorderFrom(bctx) != nil {
		return true, nil
	}
	l, err := env.readyLedger()
	if err != nil {
		metrics.Halted(OverLimitName, metrics.CauseNotReady, false)
		return false, err
	}
	over, err := l.AnyOverLimit(bctx.Context, resourceType)
	if err != nil {
		// Audit then looks at each of the object's buckets: slower, never wrong.
		return true, nil
	}
	return over, nil
}
