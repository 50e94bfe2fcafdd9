// Package version holds the version every quotakeeper binary prints (and the
// Gatekeeper build logs). The Makefile sets Version at link time from
// `git describe`:
//
//	go build -ldflags "-X github.com/quotakeeper/quotakeeper/internal/version.Version=v0.1.0" ./cmd/...
//
// A plain `go build` or `go run` leaves it "dev".
package version

import (
	"fmt"
	"runtime"
)

// Version is the release (or git describe output) the binary was built from.
// A var, not a const: -ldflags -X can only set package-level string variables.
var Version = "dev"

// String is the line a binary prints for --version: the program, the
// version, and the Go toolchain and platform it was built with.
func String(program string) string {
	return fmt.Sprintf("%s %s (%s, %s/%s)", program, Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
