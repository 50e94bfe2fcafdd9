package nodebed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/quotakeeper/quotakeeper/internal/freeport"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
)

// kubeProxyConfig is kube-proxy's configuration on this machine: the
// iptables mode (Debian's iptables, nf_tables underneath), the pod network
// as the cluster's (traffic to a Service from outside it is masqueraded),
// NodePorts on the bridge's address only and not on localhost (which would
// set route_localnet on the host), and the host's conntrack settings left
// as they are (0: kube-proxy does not write the sysctls; a shared machine's
// are not the bed's to change).
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %[1]q
mode: iptables
clusterCIDR: %[2]q
hostnameOverride: %[3]q
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:%[4]d
metricsBindAddress: 127.0.0.1:%[5]d
nodePortAddresses: [%[6]q]
iptables:
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`

// startKubeProxy runs kube-proxy on the host, as a node does: it programs
// every Service's ClusterIP into the host's iptables, so a pod reaches a
// Service it names (stock Gatekeeper calling quotakeeper's provider) and
// cluster DNS. It runs as system:kube-proxy, whom the apiserver's bootstrap
// policy binds to system:node-proxier. What an earlier bed left in
// iptables is cleaned up first.
func (b *Bed) startKubeProxy(ctx context.Context) (*localcluster.Process, error) {
	b.cleanUpKubeProxy()
	if err := b.setSysctl(bridgeNetfilter, "1"); err != nil {
		return nil, fmt.Errorf("kube-proxy needs br_netfilter: %w", err)
	}
	kubeconfig, err := b.writeKubeconfig("kube-proxy.kubeconfig", envtest.User{Name: "system:kube-proxy"})
	if err != nil {
		return nil, err
	}
	healthz, err := freeport.Get()
	if err != nil {
		return nil, err
	}
	metrics, err := freeport.Get()
	if err != nil {
		return nil, err
	}
	configFile := b.path("kube-proxy-config.yaml")
	config := fmt.Sprintf(kubeProxyConfig, kubeconfig, PodCIDR, NodeName, healthz, metrics, BridgeAddress+"/32")
	if err := os.WriteFile(configFile, []byte(config), 0o644); err != nil {
		return nil, err
	}
	p := &localcluster.Process{
		Name:    "kube-proxy",
		Path:    filepath.Join(b.opts.Assets, "kube-proxy"),
		Args:    []string{"--config=" + configFile, "--v=2"},
		LogPath: b.logPath("kube-proxy"),
		// Ready once its first sync has programmed the Services.
		Ready: fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz),
	}
	return p, p.Start(ctx, time.Minute)
}

// bridgeNetfilter passes what the bridge forwards between two pods through
// the host's iptables, as kube-proxy needs (kubeadm checks it before it
// installs a node): a pod calling a Service whose endpoint is another pod of
// the bridge gets the reply straight from that pod over the bridge, and
// only conntrack, in iptables, translates its source back to the ClusterIP.
const bridgeNetfilter = "net/bridge/bridge-nf-call-iptables"

// setSysctl sets a kernel setting, recording its value for Stop to put back.
func (b *Bed) setSysctl(name, value string) error {
	path := filepath.Join("/proc/sys", name)
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if _, ok := b.sysctls[name]; !ok {
		b.sysctls[name] = strings.TrimSpace(string(old))
	}
	return os.WriteFile(path, []byte(value), 0o644)
}

// cleanUpKubeProxy removes the chains and rules kube-proxy added to the
// host's iptables (kube-proxy --cleanup, which also clears the modes the
// bed does not use), so that a stopped bed leaves no Service rule behind.
func (b *Bed) cleanUpKubeProxy() {
	bin := filepath.Join(b.opts.Assets, "kube-proxy")
	if _, err := os.Stat(bin); err != nil {
		return
	}
	cmd := exec.Command(bin, "--cleanup")
	log, err := os.OpenFile(b.logPath("kube-proxy-cleanup"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err == nil {
		defer log.Close()
		cmd.Stdout, cmd.Stderr = log, log
	}
	_ = cmd.Run()
}
