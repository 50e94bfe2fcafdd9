package builtins

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// implementations are the builtins by name, each taking its arguments as
// Rego passes them: what Call dispatches to, so that the External Data
// provider decides with the very functions Rego calls in the builtin mode.
var implementations = map[string]rego.BuiltinDyn{
	ReserveName:      one(reserve),
	UsageName:        one(usage),
	OverLimitName:    one(overLimit),
	QuantityName:     two(quantity),
	DisplayName:      two(display),
	PolicyClaimName:  one(policyClaim),
	PodResourcesName: one(podResources),
	SelectsName:      two(selects),
}

func one(f func(rego.BuiltinContext, *ast.Term) (*ast.Term, error)) rego.BuiltinDyn {
	return func(bctx rego.BuiltinContext, args []*ast.Term) (*ast.Term, error) { return f(bctx, args[0]) }
}

func two(f func(rego.BuiltinContext, *ast.Term, *ast.Term) (*ast.Term, error)) rego.BuiltinDyn {
	return func(bctx rego.BuiltinContext, args []*ast.Term) (*ast.Term, error) { return f(bctx, args[0], args[1]) }
}

// CallError is a builtin call that did not answer: what halts the
// evaluation in the builtin mode. Its message is the builtin's own.
type CallError struct {
	Builtin string
	Err     error
}

func (e *CallError) Error() string { return fmt.Sprintf("%s: %v", e.Builtin, e.Err) }

func (e *CallError) Unwrap() error { return e.Err }

// Call calls the quota builtin name with args (JSON values: decode numbers
// as json.Number, so that amounts stay exact) as an admission review's Rego
// would in this process, and returns its answer as a JSON value. It is how
// the External Data provider (package externaldata) answers Gatekeeper's
// external_data calls: one decision code for both admission modes. A call
// that halts, or returns nothing, is a *CallError.
func Call(ctx context.Context, name string, args []any) (any, error) {
	impl, ok := implementations[name]
	if !ok {
		return nil, &CallError{Builtin: name, Err: errors.New("not a quota builtin")}
	}
	if want := len(functionNamed(name).Decl.FuncArgs().Args); len(args) != want {
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
	t, err := impl(rego.BuiltinContext{Context: ctx}, terms)
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

// functionNamed is the declaration of the builtin name; nil for a name
// that is not one.
func functionNamed(name string) *rego.Function {
	for _, f := range functions {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// Declarations are the quota builtins' names and arities, in declaration
// order: what the stock-mode Rego (package rego's external data library)
// forwards to the provider.
func Declarations() []Declaration {
	out := make([]Declaration, len(functions))
	for i, f := range functions {
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
