package nodebed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/quotakeeper/quotakeeper/internal/freeport"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
)

// kubeletConfig is the kubelet's configuration on this machine:
//   - cgroup v1 (failCgroupV1: false; the kubelet refuses v1 by default
//     since 1.35) with the cgroupfs driver, as runc is configured;
//   - containerd's socket as its runtime;
//   - the kube-dns Service as every pod's resolver (dns.go);
//   - serving on the bridge's address only, where the apiserver reaches it
//     (logs, exec), and accepting any caller there: the apiserver has no
//     kubelet client certificate in envtest, and nothing but this host
//     reaches the bridge;
//   - no eviction for disk or inodes and no image garbage collection: a
//     shared build machine's disk is often over the default thresholds
//     (85%), which would taint the node and delete our imported images.
func kubeletConfig(runtimeSocket, logsDir string, healthzPort int) *kubeletv1beta1.KubeletConfiguration {
	return &kubeletv1beta1.KubeletConfiguration{
		TypeMeta:                 metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},
		FailCgroupV1:             ptr.To(false),
		CgroupDriver:             "cgroupfs",
		ContainerRuntimeEndpoint: "unix://" + runtimeSocket,
		ClusterDNS:               []string{DNSServiceIP},
		ClusterDomain:            ClusterDomain,
		Address:                  BridgeAddress,
		HealthzBindAddress:       "127.0.0.1",
		HealthzPort:              ptr.To(int32(healthzPort)),
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(true)},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(false)},
		},
		Authorization: kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow},
		PodLogsDir:    logsDir,
		// "0%" turns a signal's eviction off.
		EvictionHard: map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "0%",
			"nodefs.inodesFree": "0%",
			"imagefs.available": "0%",
		},
		ImageGCHighThresholdPercent: ptr.To(int32(100)),
		ImageGCLowThresholdPercent:  ptr.To(int32(99)),
		FailSwapOn:                  ptr.To(false),
		ResolverConfig:              ptr.To("/etc/resolv.conf"),
	}
}

// startKubelet writes the kubelet's configuration and its kubeconfig (a
// client certificate for system:node:NodeName in system:nodes, which the
// Node authorizer and NodeRestriction admit), and starts it.
func (b *Bed) startKubelet(ctx context.Context) (*localcluster.Process, error) {
	kubeconfig, err := b.writeKubeconfig("kubelet.kubeconfig", envtest.User{Name: "system:node:" + NodeName, Groups: []string{"system:nodes"}})
	if err != nil {
		return nil, err
	}
	root, logs := b.path("kubelet"), b.path("pod-logs")
	if err := mkdirs(root, logs); err != nil {
		return nil, err
	}
	healthz, err := freeport.Get()
	if err != nil {
		return nil, err
	}
	data, err := yaml.Marshal(kubeletConfig(b.containerd.socket, logs, healthz))
	if err != nil {
		return nil, err
	}
	configFile := b.path("kubelet-config.yaml")
	if err := os.WriteFile(configFile, data, 0o644); err != nil {
		return nil, err
	}
	p := &localcluster.Process{
		Name: "kubelet",
		Path: filepath.Join(b.opts.Assets, "kubelet"),
		Args: []string{
			"--config=" + configFile,
			"--kubeconfig=" + kubeconfig,
			"--root-dir=" + root,
			"--hostname-override=" + NodeName,
			"--node-ip=" + BridgeAddress,
			"--v=2",
		},
		LogPath: b.logPath("kubelet"),
		Ready:   fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz),
	}
	return p, p.Start(ctx, 2*time.Minute)
}

// kubeletSysctls are the kernel settings the kubelet's container manager
// sets on the host at start (setupKernelTunables). On a shared machine they
// are put back when the bed stops: kernel.panic_on_oops=1 among them would
// turn a kernel oops into a reboot.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

func readSysctls() (map[string]string, error) {
	values := map[string]string{}
	for _, name := range kubeletSysctls {
		data, err := os.ReadFile(filepath.Join("/proc/sys", name))
		if err != nil {
			return nil, err
		}
		values[name] = strings.TrimSpace(string(data))
	}
	return values, nil
}

func restoreSysctls(values map[string]string) {
	for name, v := range values {
		_ = os.WriteFile(filepath.Join("/proc/sys", name), []byte(v), 0o644)
	}
}

// kubeletChains are the iptables chains the kubelet makes on the host at
// start (its canaries, the hint of which iptables backend it used, and
// KUBE-FIREWALL, which drops packets to 127.0.0.0/8 from other sources)
// and never removes; the jumps to KUBE-FIREWALL come from INPUT and OUTPUT.
var kubeletChains = []struct{ table, chain string }{
	{"filter", "KUBE-FIREWALL"}, {"filter", "KUBE-KUBELET-CANARY"},
	{"nat", "KUBE-KUBELET-CANARY"},
	{"mangle", "KUBE-KUBELET-CANARY"}, {"mangle", "KUBE-IPTABLES-HINT"},
}

// removeKubeletChains removes the kubelet's iptables chains and the rules
// that jump to them, so a stopped bed leaves no rule of the kubelet's.
func removeKubeletChains() {
	for _, from := range []string{"INPUT", "OUTPUT"} {
		// Each run deletes one jump; a killed bed's next kubelet may
		// have added another.
		for range 10 {
			if exec.Command("iptables", "-t", "filter", "-D", from, "-j", "KUBE-FIREWALL").Run() != nil {
				break
			}
		}
	}
	for _, c := range kubeletChains {
		_ = exec.Command("iptables", "-t", c.table, "-F", c.chain).Run()
		_ = exec.Command("iptables", "-t", c.table, "-X", c.chain).Run()
	}
}
