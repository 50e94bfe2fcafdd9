//go:build quotakeeper_overlay

// This file is laid over Gatekeeper's main package at build time
// (`make gatekeeper`: go build -mod=vendor -overlay). It is the only thing we
// add to Gatekeeper: init() runs before Gatekeeper's main creates its rego
// driver, so our builtins are registered in time, and it appends our setup
// to the manager functions Gatekeeper runs. The build tag keeps it out of
// this module's own builds (`go build ./...`), where it has no main to join.
package main

import "github.com/quotakeeper/quotakeeper/plugin"

// scheme is Gatekeeper's own (main.go); our kinds join it here, before its
// manager exists, because adding types once informers run is a data race.
func init() { plugin.Install(scheme) }
