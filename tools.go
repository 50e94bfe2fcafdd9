//go:build tools

// Package tools pins packages that the module needs in go.mod before (or
// without) compiled code importing them. Gatekeeper's main package is here so
// that `go mod vendor` brings it into vendor/, where `make gatekeeper` builds
// it with our overlay file (see docs/architecture.md). A main package cannot
// be imported by compiled code; the build tag keeps this file out of every
// build.
package tools

import (
	_ "github.com/google/cel-go/cel"
	_ "github.com/open-policy-agent/cert-controller/pkg/rotator"
	_ "github.com/open-policy-agent/frameworks/constraint/pkg/client"
	_ "github.com/open-policy-agent/frameworks/constraint/pkg/client/clienttest"
	_ "github.com/open-policy-agent/frameworks/constraint/pkg/client/clienttest/cts"
	_ "github.com/open-policy-agent/frameworks/constraint/pkg/client/drivers/fake"
	_ "github.com/open-policy-agent/frameworks/constraint/pkg/client/drivers/rego"
	_ "github.com/open-policy-agent/frameworks/constraint/pkg/handler/handlertest"
	_ "github.com/open-policy-agent/gatekeeper/v3"
	_ "github.com/open-policy-agent/gatekeeper/v3/pkg/gator/verify"
	_ "github.com/open-policy-agent/opa/cmd"
	_ "github.com/open-policy-agent/opa/v1/rego"
	_ "github.com/open-policy-agent/opa/v1/tester"
	_ "github.com/spf13/cobra"
	_ "k8s.io/apiserver/pkg/cel/library"
)
