//go:build tools

// Package tools pins Helm, which make builds into bin/helm-<version> from
// this module so its dependencies never enter the main module's graph.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
