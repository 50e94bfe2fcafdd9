//go:build tools

// Package tools pins the commands this module builds so that go.sum covers
// them: containerd (with its CRI plugin, which kubelet talks to), the runc
// shim it starts each pod sandbox with, and ctr, which imports our image
// tarballs into its k8s.io namespace.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
