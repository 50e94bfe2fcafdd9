package builtins

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotakeeper/quotakeeper/internal/quantities"
)

// quantity implements quota.quantity(value, unit): value as a whole number of
// unit, rounded up. The ledger counts int64 base units, Kubernetes objects
// carry quantities ("500m", "1Gi"); this is the exact conversion between
// them. Rounding up matches Kubernetes' own quota (Quantity.ScaledValue) and
// never under-counts. OPA's units.parse returns floats, which are inexact for
// large byte counts, hence a builtin.
//
// Its halts outside an observation are counted (package metrics).
func quantity(bctx rego.BuiltinContext, valueTerm, unitTerm *ast.Term) (*ast.Term, error) {
	return invalidInputHalts(bctx, QuantityName)(quantityOf(valueTerm, unitTerm))
}

func quantityOf(valueTerm, unitTerm *ast.Term) (*ast.Term, error) {
	value, err := quantityArg(valueTerm)
	if err != nil {
		return nil, rego.NewHaltError(fmt.Errorf("value: %w", err))
	}
	unitStr, ok := unitTerm.Value.(ast.String)
	if !ok {
		return nil, rego.NewHaltError(fmt.Errorf("unit: must be a string, got %s", ast.ValueName(unitTerm.Value)))
	}
	unit, err := quantities.Parse("1" + string(unitStr))
	if err != nil {
		return nil, rego.NewHaltError(fmt.Errorf("unit: %q is not a quantity suffix (use \"\", \"m\", \"k\", \"M\", \"Ki\", \"Mi\", \"Gi\", ...)", string(unitStr)))
	}
	n, err := ceilDiv(value, unit)
	if err != nil {
		return nil, rego.NewHaltError(fmt.Errorf("value %s in units of %q: %w", value.String(), string(unitStr), err))
	}
	return ast.NewTerm(ast.Number(strconv.FormatInt(n, 10))), nil
}

func quantityArg(t *ast.Term) (resource.Quantity, error) {
	var s string
	switch v := t.Value.(type) {
	case ast.String:
		s = string(v)
	case ast.Number:
		s = string(v)
		// Rego numbers may be written 1e3; a quantity's exponent is "e3".
		if r, ok := new(big.Rat).SetString(s); ok && r.IsInt() {
			s = r.Num().String()
		}
	default:
		return resource.Quantity{}, fmt.Errorf("must be a quantity string or a number, got %s", ast.ValueName(t.Value))
	}
	q, err := quantities.Parse(s)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q: %w", s, err)
	}
	if q.Sign() < 0 {
		return resource.Quantity{}, fmt.Errorf("must not be negative, got %s", q.String())
	}
	return q, nil
}

var errOverflow = errors.New("overflows int64")

// ceilDiv returns ⌈value/unit⌉ exactly, through rationals: both quantities
// are decimal or binary multiples that a float64 would round. Writing them
// out in decimal is cheap because quantities.Parse bounds their exponents.
func ceilDiv(value, unit resource.Quantity) (int64, error) {
	v, ok1 := new(big.Rat).SetString(value.AsDec().String())
	u, ok2 := new(big.Rat).SetString(unit.AsDec().String())
	if !ok1 || !ok2 || u.Sign() <= 0 {
		return 0, fmt.Errorf("cannot divide %s by %s", value.String(), unit.String())
	}
	r := new(big.Rat).Quo(v, u)
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, errOverflow
	}
	return q.Int64(), nil
}
