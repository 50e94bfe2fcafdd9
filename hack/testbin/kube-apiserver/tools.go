//go:build tools

// Package tools pins the commands this module builds so that go.sum covers
// them: kube-apiserver for every test bed, kube-controller-manager, whose
// garbage collector the end-to-end tests need (owned ResourceClaims are
// deleted with their objects), and kubelet, kube-proxy and kube-scheduler,
// which the real-node test bed (test/node, make node-e2e) joins to the
// control plane.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
