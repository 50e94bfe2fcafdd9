package usage

import "testing"

// TestFormat checks the display-unit arithmetic the golden files rely on,
// including factors that do not divide evenly.
func TestFormat(t *testing.T) {
	cores := Unit{BaseUnit: "millicores", DisplayUnit: "cores", UnitConversionFactor: 1000}
	for _, tc := range []struct {
		u    Unit
		v    int64
		want string
	}{
		{cores, 8000, "8 cores"},
		{cores, 500, "0.5 cores"},
		{cores, 1, "0.001 cores"},
		{cores, 0, "0 cores"},
		{Unit{BaseUnit: "B", DisplayUnit: "KiB", UnitConversionFactor: 1024}, 1536, "1.5 KiB"},
		{Unit{BaseUnit: "x", DisplayUnit: "thirds", UnitConversionFactor: 3}, 1, "0.333 thirds"},
		{Unit{BaseUnit: "configmaps"}, 7, "7 configmaps"},
		{Unit{}, 9223372036854775807, "9223372036854775807"},
	} {
		if got := tc.u.Format(tc.v); got != tc.want {
			t.Errorf("%+v.Format(%d) = %q, want %q", tc.u, tc.v, got, tc.want)
		}
	}
}
