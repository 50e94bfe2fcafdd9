package nodebed

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Pods reach the apiserver as in a cluster, through the kubernetes Service:
// KUBERNETES_SERVICE_HOST is the Service's ClusterIP (the first address of
// ServiceCIDR) and the port 443. The apiserver itself listens on exactly
// that address and port, which the bed puts on lo: its serving certificate
// names the address (envtest adds the listen address), so client-go's
// in-cluster configuration verifies it against the CA that kube-root-ca.crt
// publishes. kube-proxy (proxy.go) programs that Service too (its endpoint
// is the apiserver's advertised address, the same 10.96.0.1:443), so a
// pod's packets are translated to where they were going anyway; the address
// on lo stays because the certificate needs it, and it is what lets the
// control plane start before kube-proxy.
//
// Every other Service's ClusterIP is kube-proxy's: a pod's packets to it
// leave through its default route (the bridge), are translated in the
// host's PREROUTING to an endpoint's pod IP and routed back to the bridge;
// replies between two pods of the bridge pass the host's iptables
// (bridge-nf-call-iptables), so they are translated back.
//
// The apiserver reaches pods directly: it calls webhook Services through
// their endpoints (--enable-aggregator-routing), on the pod IPs of the
// bridge's /24, which the host routes to the bridge.
const (
	// ServiceCIDR is the apiserver's --service-cluster-ip-range.
	ServiceCIDR = "10.96.0.0/24"
	// APIServerAddress is the kubernetes Service's ClusterIP, where the
	// apiserver listens.
	APIServerAddress = "10.96.0.1"
	// APIServerPort is the kubernetes Service's port, the apiserver's.
	APIServerPort = 443
	// PodCIDR is the range host-local hands pod IPs out of.
	PodCIDR = "10.244.77.0/24"
	// Bridge is the host bridge every pod's veth is attached to; it holds
	// BridgeAddress, the pods' gateway and the node's InternalIP.
	Bridge        = "qkbr0"
	BridgeAddress = "10.244.77.1"
)

// setUpNetwork puts APIServerAddress on lo and creates Bridge with
// BridgeAddress. The bridge exists before the kubelet starts because the
// kubelet's node IP must be an address of the host (and not a loopback
// one); the CNI bridge plugin then uses it as it finds it. What an earlier
// bed left behind (a killed test) is removed first.
func setUpNetwork() error {
	tearDownNetwork()
	for _, args := range [][]string{
		{"addr", "add", APIServerAddress + "/32", "dev", "lo"},
		{"link", "add", Bridge, "type", "bridge"},
		{"addr", "add", BridgeAddress + "/24", "dev", Bridge},
		{"link", "set", Bridge, "up"},
	} {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return nil
}

// tearDownNetwork removes the bridge and the address; either may be gone.
func tearDownNetwork() {
	_ = ip("link", "del", Bridge)
	_ = ip("addr", "del", APIServerAddress+"/32", "dev", "lo")
}

func ip(args ...string) error {
	cmd := exec.Command("ip", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// writeCNIConfig writes the network containerd's CRI plugin sets each pod up
// with: a veth on Bridge, an address of PodCIDR, a default route through
// the bridge. No masquerading: pods talk only to this host. CRI adds the
// pod's lo with the loopback plugin itself.
func writeCNIConfig(confDir, dataDir string) error {
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "quotakeeper-node",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": %q
    }
  }]
}
`, Bridge, PodCIDR, BridgeAddress, dataDir)
	if err := mkdirs(confDir, dataDir); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(confDir, "10-quotakeeper-node.conflist"), []byte(conf), 0o644)
}
