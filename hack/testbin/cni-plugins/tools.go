//go:build tools

// Package tools pins the CNI plugins this module builds so that go.sum covers
// them: bridge (a veth per pod on one host bridge), host-local (pod IPs from
// the node's /24) and loopback (each pod's lo).
package tools

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
)
