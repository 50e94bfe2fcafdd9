package main

import (
	"log/slog"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
)

// holdHeapUnderLimit sets the Go runtime's soft memory limit (GOMEMLIMIT)
// to 90% of the limit provider reports, the container's memory limit from
// its cgroup in a Pod. The observer holds every counted object, so the
// manager's heap grows with them (docs/operations.md#sizing-the-manager);
// near the limit the garbage collector then works harder instead of the
// kernel killing the process, which would only load everything again. A
// GOMEMLIMIT in the environment is kept; AUTOMEMLIMIT=off turns this off,
// AUTOMEMLIMIT=0.8 sets another ratio (the library's own switches). No
// limit, or none found, leaves the runtime's default: a failure here is
// logged, never fatal.
func holdHeapUnderLimit(provider memlimit.Provider, log logr.Logger) int64 {
	limit, _ := memlimit.Set(
		memlimit.WithProvider(provider),
		memlimit.WithRatio(0.9),
		memlimit.WithLogger(slog.New(logr.ToSlogHandler(log))),
	)
	return limit
}
