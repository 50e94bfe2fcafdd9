//go:build tools

// Package tools pins the commands this module builds so that go.sum covers
// them: kube-apiserver for every test bed, and kube-controller-manager, whose
// garbage collector the end-to-end tests need (owned ResourceClaims are
// deleted with their objects).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
