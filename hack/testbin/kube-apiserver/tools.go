//go:build tools

// Package tools pins the kube-apiserver command so that go.sum covers it.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
