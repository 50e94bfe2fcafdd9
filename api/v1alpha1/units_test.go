package v1alpha1

import (
	"math"
	"testing"
)

// Format is exact: a decimal when the quotient has a finite one, else the
// fraction; never a rounded number.
func TestUnitsFormat(t *testing.T) {
	cores := Units{BaseUnit: "millicores", DisplayUnit: "cores", UnitConversionFactor: 1000}
	for _, tc := range []struct {
		u    Units
		v    int64
		want string
	}{
		{cores, 8000, "8 cores"},
		{cores, 500, "0.5 cores"},
		{cores, 1, "0.001 cores"},
		{cores, 0, "0 cores"},
		{cores, -1500, "-1.5 cores"},
		{cores, math.MaxInt64, "9223372036854775.807 cores"},
		{Units{BaseUnit: "B", DisplayUnit: "KiB", UnitConversionFactor: 1024}, 1536, "1.5 KiB"},
		{Units{BaseUnit: "B", DisplayUnit: "KiB", UnitConversionFactor: 1024}, 1, "0.0009765625 KiB"},
		{Units{BaseUnit: "x", DisplayUnit: "thirds", UnitConversionFactor: 3}, 1, "1/3 thirds"},
		{Units{BaseUnit: "x", DisplayUnit: "thirds", UnitConversionFactor: 3}, 10, "10/3 thirds"},
		{Units{BaseUnit: "x", DisplayUnit: "thirds", UnitConversionFactor: 3}, 9, "3 thirds"},
		{Units{BaseUnit: "eggs", DisplayUnit: "dozens", UnitConversionFactor: 12}, 18, "1.5 dozens"},
		{Units{BaseUnit: "eggs", DisplayUnit: "dozens", UnitConversionFactor: 12}, 4, "1/3 dozens"},
		{Units{BaseUnit: "configmaps"}, 7, "7 configmaps"},
		{Units{BaseUnit: "configmaps", DisplayUnit: "configmaps", UnitConversionFactor: 1}, 7, "7 configmaps"},
		{Units{BaseUnit: "bytes", DisplayUnit: "cores"}, 7, "7 bytes"}, // no factor: base units
		{Units{}, math.MaxInt64, "9223372036854775807"},
	} {
		if got := tc.u.Format(tc.v); got != tc.want {
			t.Errorf("%+v.Format(%d) = %q, want %q", tc.u, tc.v, got, tc.want)
		}
	}
}
