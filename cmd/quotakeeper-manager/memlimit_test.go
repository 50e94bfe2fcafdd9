package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
)

func TestHoldHeapUnderLimit(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name     string
		env      map[string]string
		provider memlimit.Provider
		want     int64
	}{
		{"90% of the container's limit", nil, memlimit.Limit(1000 * mib), 900 * mib},
		{"no limit found", nil, func() (uint64, error) { return 0, memlimit.ErrNoLimit }, math.MaxInt64},
		{"GOMEMLIMIT in the environment wins", map[string]string{"GOMEMLIMIT": "300MiB"}, memlimit.Limit(1000 * mib), -1},
		{"AUTOMEMLIMIT=off", map[string]string{"AUTOMEMLIMIT": "off"}, memlimit.Limit(1000 * mib), -1},
		{"AUTOMEMLIMIT sets the ratio", map[string]string{"AUTOMEMLIMIT": "0.5"}, memlimit.Limit(1000 * mib), 500 * mib},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			before := debug.SetMemoryLimit(-1)
			t.Cleanup(func() { debug.SetMemoryLimit(before) })
			want := tc.want
			if want == -1 {
				want = before // left alone
			}
			if got := holdHeapUnderLimit(tc.provider, logr.Discard()); got != want {
				t.Errorf("returned %d, want %d", got, want)
			}
			if got := debug.SetMemoryLimit(-1); got != want {
				t.Errorf("the runtime's limit is %d, want %d", got, want)
			}
		})
	}
}
