package v1alpha1

import (
	"math/big"
	"strconv"
)

// Units is how a resource type's amounts are counted and shown, as its
// ResourceRegistration declares them: amounts are whole numbers of BaseUnit;
// people read them in DisplayUnit, UnitConversionFactor base units to one
// display unit (8000 millicores shown as 8 cores with factor 1000).
type Units struct {
	// BaseUnit is the unit amounts are counted in, such as "millicores".
	// +optional
	BaseUnit string `json:"baseUnit,omitempty"`
	// DisplayUnit is the unit shown to people, such as "cores".
	// +optional
	DisplayUnit string `json:"displayUnit,omitempty"`
	// UnitConversionFactor is how many base units make one display unit.
	// +optional
	UnitConversionFactor int64 `json:"unitConversionFactor,omitempty"`
}

// UnitsOf returns the units a registration declares.
func UnitsOf(r *ResourceRegistration) Units {
	return Units{BaseUnit: r.Spec.BaseUnit, DisplayUnit: r.Spec.DisplayUnit, UnitConversionFactor: r.Spec.UnitConversionFactor}
}

// HasDisplay reports whether amounts are shown in a unit other than the
// base unit: a display unit with a factor, and not the base unit at factor 1.
func (u Units) HasDisplay() bool {
	return u.DisplayUnit != "" && u.UnitConversionFactor >= 1 &&
		(u.DisplayUnit != u.BaseUnit || u.UnitConversionFactor != 1)
}

// Format shows a base-unit amount in display units ("8 cores" for 8000 at
// factor 1000), else in base units ("8000 millicores"), else as a bare
// number when the units are unknown. See DisplayNumber for how parts of a
// display unit are written.
func (u Units) Format(amount int64) string {
	if !u.HasDisplay() {
		return u.Base(amount)
	}
	return withUnit(u.DisplayNumber(amount), u.DisplayUnit)
}

// Base shows the amount as the API holds it, with its base unit when known.
func (u Units) Base(amount int64) string {
	return withUnit(strconv.FormatInt(amount, 10), u.BaseUnit)
}

// DisplayNumber is amount / UnitConversionFactor written exactly, with no
// rounding: a decimal when the quotient has one ("0.5", "0.001", "1.5" for
// 1536 at factor 1024, since 1/1024 is a finite decimal), else the fraction
// in lowest terms ("1/3" for 1 at factor 3, "10/3" for 10). The base-unit
// amount itself when there is no display unit.
func (u Units) DisplayNumber(amount int64) string {
	if !u.HasDisplay() {
		return strconv.FormatInt(amount, 10)
	}
	q := new(big.Rat).SetFrac(big.NewInt(amount), big.NewInt(u.UnitConversionFactor))
	if digits, ok := decimalDigits(q.Denom()); ok {
		return q.FloatString(digits)
	}
	return q.String() // "a/b", in lowest terms
}

// decimalDigits is how many decimals write 1/d exactly: d = 2^a 5^b needs
// max(a, b); any other prime factor makes the decimal infinite.
func decimalDigits(d *big.Int) (int, bool) {
	d = new(big.Int).Set(d)
	two, five, zero := big.NewInt(2), big.NewInt(5), new(big.Int)
	var a, b int
	m := new(big.Int)
	for m.Mod(d, two).Cmp(zero) == 0 {
		d.Quo(d, two)
		a++
	}
	for m.Mod(d, five).Cmp(zero) == 0 {
		d.Quo(d, five)
		b++
	}
	return max(a, b), d.IsInt64() && d.Int64() == 1
}

func withUnit(value, unit string) string {
	if unit == "" {
		return value
	}
	return value + " " + unit
}
