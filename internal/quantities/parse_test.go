package quantities_test

import (
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/quantities"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "1Ei", want: "1Ei"},
		{in: "10E", want: "10E"},
		{in: "1e3", want: "1e3"},
		{in: "5e-1", want: "500e-3"},
		{in: "1e1000", want: "10e999"},
		// apimachinery's parser spins on these.
		{in: "1e2147483648", err: "exponent 2147483648 out of range (at most ±1000)"},
		{in: "1e-9999999999", err: "exponent -9999999999 out of range (at most ±1000)"},
		{in: "10000E200000000020000000", err: "exponent 200000000020000000 out of range (at most ±1000)"},
		{in: "1e1001", err: "exponent 1001 out of range (at most ±1000)"},
		{in: "lots", err: "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
	} {
		q, err := quantities.Parse(tc.in)
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("Parse(%q): error %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || q.String() != tc.want):
			t.Errorf("Parse(%q) = %s, %v; want %s", tc.in, q.String(), err, tc.want)
		}
	}
}
