// Package nodebed joins a real Kubernetes node to a control plane on this
// machine: etcd and kube-apiserver (envtest, from bin/testbin), the
// controller manager with its default controllers and kube-scheduler, then
// containerd with runc and the CNI bridge plugin, a kubelet, kube-proxy and
// the cluster DNS (CoreDNS in a pod). Our images are imported into
// containerd from their tarballs (make images) or OCI layouts (make
// release), so pods run them without a registry. It is the foundation of
// make node-e2e (test/node): what internal/localcluster fakes with local
// processes (a Deployment's pods, Services in front of webhooks, a
// Service's name) happens here as in a cluster.
//
// It is separate from localcluster because it needs root and changes the
// host: an address on lo, a bridge, cgroups and a few sysctls the kubelet
// sets (restored on Stop). One bed runs on a machine at a time.
package nodebed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/quotakeeper/quotakeeper/internal/localcluster"
)

// NodeName is the name the kubelet registers its Node under.
const NodeName = "quotakeeper-node"

// Options describe the node to bring up.
type Options struct {
	// Dir holds every file of the bed: certificates, configurations,
	// containerd's and the kubelet's state, logs. It must exist.
	Dir string
	// Testbin holds kube-apiserver, etcd and kube-controller-manager
	// (make testbin; checkout.Testbin).
	Testbin string
	// Assets holds the node's binaries, as make node-bin links them:
	// kubelet, kube-scheduler, containerd, containerd-shim-runc-v2, ctr,
	// runc, and cni/ with the CNI plugins.
	Assets string
	// Pause is the tarball of the sandbox image.
	Pause string
	// DNS is the tarball of the cluster DNS's image (CoreDNS).
	DNS string
	// Images are images to import into containerd before the kubelet
	// starts: tarballs (docker-archive, as make images writes them) or OCI
	// image layouts (directories, as make release writes them; their
	// linux image of this machine's architecture is imported).
	Images []string
}

// Bed is a running control plane with one real node.
type Bed struct {
	// Config reaches the apiserver as cluster administrator.
	Config *rest.Config
	// Clientset is Config's clientset.
	Clientset kubernetes.Interface
	// Kubeconfig is the administrator's kubeconfig file, for kubectl.
	Kubeconfig string
	// Images maps each imported tarball or layout to the reference its
	// image is tagged with (docker.io/library/quotakeeper-manager:v0.1.0):
	// what a pod names, and what the kubelet finds without pulling.
	Images map[string]string
	// Processes are the node's and the controllers' processes, in the
	// order they started.
	Processes []*localcluster.Process

	opts       Options
	env        *envtest.Environment
	containerd *containerd
	sysctls    map[string]string
}

// Start brings the bed up and waits until the node is Ready and the
// cluster DNS answers through kube-proxy. On error, everything started is
// stopped.
func Start(ctx context.Context, opts Options) (*Bed, error) {
	b := &Bed{opts: opts, Images: map[string]string{}}
	if err := b.start(ctx); err != nil {
		b.Stop()
		return nil, err
	}
	return b, nil
}

func (b *Bed) start(ctx context.Context) error {
	if err := setUpNetwork(); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	if err := b.startControlPlane(ctx); err != nil {
		return err
	}
	if err := b.startControllers(ctx); err != nil {
		return err
	}
	for _, image := range append([]string{b.opts.Pause, b.opts.DNS}, b.opts.Images...) {
		ref, err := imageReference(image)
		if err != nil {
			return err
		}
		b.Images[image] = ref
	}
	var err error
	if b.containerd, err = startContainerd(ctx, b.opts, b.Images[b.opts.Pause]); err != nil {
		return err
	}
	b.Processes = append(b.Processes, b.containerd.process)
	for image, ref := range b.Images {
		if err := b.containerd.importImage(ctx, image, ref); err != nil {
			return err
		}
	}
	if b.sysctls, err = readSysctls(); err != nil {
		return err
	}
	kubelet, err := b.startKubelet(ctx)
	if err != nil {
		return err
	}
	b.Processes = append(b.Processes, kubelet)
	if err := b.waitNodeReady(ctx, 3*time.Minute); err != nil {
		return err
	}
	proxy, err := b.startKubeProxy(ctx)
	if err != nil {
		return err
	}
	b.Processes = append(b.Processes, proxy)
	return b.startDNS(ctx, b.Images[b.opts.DNS])
}

// Stop ends kube-proxy and the kubelet, removes every container it left,
// stops containerd and the control plane, removes kube-proxy's and the
// kubelet's iptables rules, restores the sysctls the kubelet and the bed
// set, removes the kubelet's cgroups, unmounts what the node mounted under
// Dir and takes the network down.
func (b *Bed) Stop() {
	for i := len(b.Processes) - 1; i >= 0; i-- {
		p := b.Processes[i]
		if b.containerd != nil && p == b.containerd.process {
			b.containerd.removeContainers()
		}
		p.Stop()
	}
	if b.containerd != nil {
		b.containerd.killShims()
	}
	if b.env != nil {
		_ = b.env.Stop()
	}
	b.cleanUpKubeProxy()
	removeKubeletChains()
	restoreSysctls(b.sysctls)
	removeKubeletCgroups()
	unmountUnder(b.opts.Dir)
	tearDownNetwork()
}

// waitNodeReady waits until the node reports Ready.
func (b *Bed) waitNodeReady(ctx context.Context, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		node, err := b.Clientset.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s: %s", c.Status, c.Message)
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		last = "no Ready condition yet"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready after %s (%s); see %s: %w", NodeName, timeout, last, b.logPath("kubelet"), err)
	}
	return nil
}

func (b *Bed) logPath(name string) string { return filepath.Join(b.opts.Dir, name+".log") }

// path is a file or directory under Dir.
func (b *Bed) path(elem ...string) string {
	return filepath.Join(append([]string{b.opts.Dir}, elem...)...)
}

func mkdirs(dirs ...string) error {
	var errs []error
	for _, d := range dirs {
		errs = append(errs, os.MkdirAll(d, 0o755))
	}
	return errors.Join(errs...)
}
