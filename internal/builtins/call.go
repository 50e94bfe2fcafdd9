package builtins

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// CallError is a builtin call that did not answer: what halts the
// evaluation in the builtin mode. Its message is the builtin's own.
type CallError struct {
	Builtin string
	Err     error
}

func (e *CallError) Error() string { return fmt.Sprintf("%s: %v", e.Builtin, e.Err) }

func (e *CallError) Unwrap() error { return e.Err }

// Call calls the quota builtin name with args (JSON values: decode numbers
// as json.Number, so that amounts stay exact) against env, as an admission
// review's Rego would, and returns its answer as a JSON value. It is how
// the External Data provider (package externaldata) answers Gatekeeper's
// external_data calls: the implementations Register registers, so one
// decision code serves both admission modes. A call that halts, or
// returns nothing, is a *CallError.
func Call(ctx context.Context, env *Env, name string, args []any) (any, error) {
	var decl *rego.Function
	for _, f := range declare().all() {
		if f.Name == name {
			decl = f
		}
	}
	if decl == nil {
		return nil, &CallError{Builtin: name, Err: errors.New("not a quota builtin")}
	}
	if want := len(decl.Decl.FuncArgs().Args); len(args) != want {
		return nil, &CallError{Builtin: name, Err: fmt.Errorf("takes %d arguments, got %d", want, len(args))}
	}
	terms := make([]*ast.Term, len(args))
	for i, a := range args {
		v, err := ast.InterfaceToValue(a)
		if err != nil {
			return nil, &CallError{Builtin: name, Err: fmt.Errorf("argument %d: %w", i+1, err)}
		}
		terms[i] = ast.NewTerm(v)
	}
	t, err := call(env, rego.BuiltinContext{Context: ctx}, name, terms)
	if err != nil {
		// A halt's message is its cause's (rego.HaltError delegates).
		return nil, &CallError{Builtin: name, Err: err}
	}
	if t == nil {
		return nil, &CallError{Builtin: name, Err: errors.New("no answer")}
	}
	out, err := ast.JSON(t.Value)
	if err != nil {
		return nil, &CallError{Builtin: name, Err: err}
	}
	return out, nil
}

// call dispatches to the implementation Register registers for name.
func call(env *Env, bctx rego.BuiltinContext, name string, a []*ast.Term) (*ast.Term, error) {
	switch name {
	case ReserveName:
		return reserve(env, bctx, a[0])
	case UsageName:
		return usage(env, bctx, a[0])
	case OverLimitName:
		return overLimit(env, bctx, a[0])
	case PolicyClaimName:
		return policyClaim(env, bctx, a[0])
	case QuantityName:
		return quantity(bctx, a[0], a[1])
	case DisplayName:
		return display(bctx, a[0], a[1])
	case PodResourcesName:
		return podResources(bctx, a[0])
	case SelectsName:
		return selects(bctx, a[0], a[1])
	case ReviewName:
		return review(env, bctx, a[0], a[1])
	}
	return nil, errors.New("not a quota builtin")
}

// Declarations are the quota builtins' names and arities, in declaration
// order: what the stock-mode Rego (package rego's External Data library)
// forwards to the provider.
func Declarations() []Declaration {
	fs := declare().all()
	out := make([]Declaration, len(fs))
	for i, f := range fs {
		out[i] = Declaration{Name: f.Name, Arity: len(f.Decl.FuncArgs().Args), Nondeterministic: f.Nondeterministic}
	}
	return out
}

// Declaration is one quota builtin as another process calls it.
type Declaration struct {
	Name  string
	Arity int
	// Nondeterministic: the answer depends on state (the ledger, the
	// policies loaded), so it is asked per admission request.
	Nondeterministic bool
}
