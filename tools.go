//go:build tools

// Package tools pins Gatekeeper's main package so that `go mod vendor` brings
// it into vendor/, where `make gatekeeper` builds it with our overlay file
// (see docs/architecture.md). A main package cannot be imported by compiled
// code; the build tag keeps this file out of every build.
package tools

import _ "github.com/open-policy-agent/gatekeeper/v3"
