package builtins

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"gopkg.in/inf.v0"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotakeeper/quotakeeper/metrics"
	"github.com/quotakeeper/quotakeeper/quantities"
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
	t, err := quantityOf(valueTerm, unitTerm)
	if err != nil && recorderFrom(bctx) == nil {
		metrics.Halted(QuantityName, metrics.CauseInvalidInput, false)
	}
	return t, err
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
// are decimal or binary multiples that a float64 would round. A quantity's
// exponent may be huge ("1e20000000" parses in microseconds), so nothing here
// writes a quantity out in full: the ratio is decided from the orders of
// magnitude when they are far apart, and otherwise computed from the
// unscaled digits with a power of ten bounded by the input's length.
func ceilDiv(value, unit resource.Quantity) (int64, error) {
	dv, du := value.AsDec(), unit.AsDec()
	if du.Sign() <= 0 {
		return 0, fmt.Errorf("cannot divide %s by %s", value.String(), unit.String())
	}
	if dv.Sign() == 0 {
		return 0, nil
	}
	// value lies in [10^(mv-1), 10^mv), unit in [10^(mu-1), 10^mu).
	mv, mu := magnitude(dv), magnitude(du)
	switch {
	case mv-mu > 20: // value/unit > 10^(mv-mu-1) >= 10^20, past int64
		return 0, errOverflow
	case mu-mv >= 1: // 0 < value/unit < 10^(mv-mu+1) <= 1
		return 1, nil
	}
	// value/unit = (a/b)·10^e for the unscaled digits a and b.
	r := new(big.Rat).SetFrac(dv.UnscaledBig(), du.UnscaledBig())
	e := int64(du.Scale()) - int64(dv.Scale())
	pow := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(max(e, -e)), nil))
	if e >= 0 {
		r.Mul(r, pow)
	} else {
		r.Quo(r, pow)
	}
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, errOverflow
	}
	return q.Int64(), nil
}

// magnitude is the number of digits of d's integer part: d lies in
// [10^(m-1), 10^m) for positive d.
func magnitude(d *inf.Dec) int64 {
	return int64(len(d.UnscaledBig().Text(10))) - int64(d.Scale())
}
