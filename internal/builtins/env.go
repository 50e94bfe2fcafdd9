package builtins

import (
	"context"
	"errors"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/quotakeeper/quotakeeper/internal/claimpolicies"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// Env is what the quota builtins decide against. The hosting process builds
// it: a memory-store ledger for quotactl and tests, the Kubernetes-backed
// one inside Gatekeeper. An evaluation finds it in its context (WithEnv) or,
// when the context carries none, asks the process's (Register), so two
// evaluations with different Envs can run side by side.
//
// An Env is not changed once an evaluation may read it: a process whose
// state grows (the plugin, as its informers sync) hands over a new Env
// whole.
type Env struct {
	// Ledger is what quota.reserve, quota.usage and quota.over_limit read
	// and write; without one every call halts (not ready).
	Ledger *ledger.Ledger
	// Units gives the registrations' units quota.reserve and quota.usage
	// return beside each bucket's numbers; without it they return none
	// (units change how a number is shown, never a decision).
	Units UnitSource
	// ClaimPolicies are the ClaimCreationPolicies quota.policy_claim
	// renders; without them every call halts.
	ClaimPolicies *claimpolicies.Set
	// Counted, when set, makes quota.reserve deny every claim whose
	// constraint's policy version it does not hold (counted.go); nil (Rego
	// tests, quotactl's offline suites) checks nothing.
	Counted CountedPolicies
	// Deadline bounds each quota.reserve call (deadline.go); 0: only the
	// evaluation's own context does.
	Deadline time.Duration
}

type envKey struct{}

// WithEnv returns a context under which the builtins decide against env
// instead of the process's. The frameworks rego driver hands the context of
// Client.Review to rego.Eval, and OPA gives it to every builtin as
// BuiltinContext.Context, so env travels with one evaluation only.
func WithEnv(ctx context.Context, env *Env) context.Context {
	return context.WithValue(ctx, envKey{}, env)
}

// envs finds the Env of one builtin call: the evaluation's (WithEnv), else
// the process's. The registered implementations close over it.
type envs struct {
	// process is the Env of evaluations whose context carries none (the
	// OPA CLI's, Gatekeeper's audit); nil, or returning nil: none.
	process func() *Env
}

func (e envs) of(bctx rego.BuiltinContext) *Env {
	if bctx.Context != nil {
		if env, ok := bctx.Context.Value(envKey{}).(*Env); ok && env != nil {
			return env
		}
	}
	if e.process == nil {
		return nil
	}
	return e.process()
}

var errNoLedger = errors.New("quota is not ready: the plugin has not loaded the ResourceGrants yet (it decides nothing until it has; see docs/troubleshooting.md)")

// readyLedger is env's ledger, or the halt that says there is none yet.
func (env *Env) readyLedger() (*ledger.Ledger, error) {
	if env == nil || env.Ledger == nil {
		return nil, rego.NewHaltError(errNoLedger)
	}
	return env.Ledger, nil
}
