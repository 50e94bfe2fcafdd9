//go:build tools

// Package tools pins golangci-lint so that go.sum covers it; the Makefile
// builds github.com/golangci/golangci-lint/v2/cmd/golangci-lint from this
// module into bin/, keyed by version.
package tools

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
