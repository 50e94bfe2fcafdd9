package builtins

import (
	"encoding/json"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// UnitSource gives a resource type's units: those its active
// ResourceRegistration declares. quota.reserve and quota.usage return them
// with each bucket's numbers, so a denial can show the amounts in display
// units beside the base units.
type UnitSource interface {
	// UnitsFor returns the units of resourceType; false when no active
	// registration of it is known.
	UnitsFor(resourceType string) (quotav1alpha1.Units, bool)
}

// units is resourceType's units from env's source as the builtins return
// them; {} when unknown or env has no source. Without one denials carry
// base-unit numbers only: units only change how a number is shown, never a
// decision, so a source that has not loaded yet fails nothing.
func (env *Env) units(resourceType string) map[string]any {
	if env == nil || env.Units == nil {
		return map[string]any{}
	}
	u, ok := env.Units.UnitsFor(resourceType)
	if !ok {
		return map[string]any{}
	}
	return map[string]any{
		"baseUnit":             u.BaseUnit,
		"displayUnit":          u.DisplayUnit,
		"unitConversionFactor": u.UnitConversionFactor,
	}
}

// display implements quota.display(amount, units): amount, a whole number
// of base units, written in units' display unit exactly
// (v1alpha1.Units.DisplayNumber: "0.5", "10/3", never rounded), or the
// amount itself when units declare no display unit other than the base.
func display(bctx rego.BuiltinContext, amountTerm, unitsTerm *ast.Term) (*ast.Term, error) {
	return invalidInputHalts(bctx, DisplayName)(displayOf(amountTerm, unitsTerm))
}

func displayOf(amountTerm, unitsTerm *ast.Term) (*ast.Term, error) {
	n, ok := amountTerm.Value.(ast.Number)
	if !ok {
		return nil, rego.NewHaltError(fmt.Errorf("amount: must be a number, got %s", ast.ValueName(amountTerm.Value)))
	}
	amount, err := wholeNumber(json.Number(n))
	if err != nil {
		return nil, rego.NewHaltError(fmt.Errorf("amount: %w", err))
	}
	v, err := toJSON("units", unitsTerm)
	if err != nil {
		return nil, err
	}
	var d decoder
	var u quotav1alpha1.Units
	if m := d.object("units", v, "baseUnit", "displayUnit", "unitConversionFactor"); m != nil {
		u.BaseUnit = d.str("units", m, "baseUnit")
		u.DisplayUnit = d.str("units", m, "displayUnit")
		if _, ok := m["unitConversionFactor"]; ok {
			u.UnitConversionFactor = d.int64("units", m, "unitConversionFactor")
		}
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	return ast.StringTerm(u.DisplayNumber(amount)), nil
}
