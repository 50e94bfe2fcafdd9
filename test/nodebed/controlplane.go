package nodebed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/quotakeeper/quotakeeper/internal/freeport"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
)

// startControlPlane starts etcd and kube-apiserver as envtest does, with
// what a node needs of the apiserver beyond envtest's defaults:
//   - it listens on the kubernetes Service's ClusterIP and port (network.go);
//   - the Node authorizer and NodeRestriction, so the kubelet runs with a
//     node's rights (system:node:<name> in system:nodes), not an admin's;
//   - the ServiceAccount admission plugin, which envtest disables: it
//     mounts each pod's token and kube-root-ca.crt;
//   - aggregator routing: webhook and APIService calls go to a Service's
//     endpoints, so no kube-proxy is needed for them;
//   - the kubelet reached at the node's InternalIP.
func (b *Bed) startControlPlane(ctx context.Context) error {
	b.env = &envtest.Environment{BinaryAssetsDirectory: b.opts.Testbin}
	api := b.env.ControlPlane.GetAPIServer()
	// SecureServing's, embedded: where kube-apiserver serves.
	api.Address = APIServerAddress
	api.Port = strconv.Itoa(APIServerPort)
	api.Configure().
		Set("service-cluster-ip-range", ServiceCIDR).
		Set("authorization-mode", "Node", "RBAC").
		Set("enable-admission-plugins", "NodeRestriction").
		Disable("disable-admission-plugins").
		Set("enable-aggregator-routing", "true").
		// The node's name resolves nowhere: reach the kubelet (logs,
		// exec) at its InternalIP, the bridge's address.
		Set("kubelet-preferred-address-types", "InternalIP").
		Set("allow-privileged", "true")
	var err error
	if b.Config, err = b.env.Start(); err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	if b.Clientset, err = kubernetes.NewForConfig(b.Config); err != nil {
		return err
	}
	b.Kubeconfig, err = b.writeKubeconfig("admin.kubeconfig", envtest.User{Name: "quotakeeper-admin", Groups: []string{"system:masters"}})
	return err
}

// writeKubeconfig writes a kubeconfig for user, authenticated by a client
// certificate of envtest's CA.
func (b *Bed) writeKubeconfig(file string, user envtest.User) (string, error) {
	u, err := b.env.AddUser(user, b.Config)
	if err != nil {
		return "", err
	}
	data, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := b.path(file)
	return path, os.WriteFile(path, data, 0o600)
}

// startControllers runs kube-controller-manager with its default
// controllers (Deployments, ReplicaSets, EndpointSlices, the default
// ServiceAccount of each namespace, kube-root-ca.crt, the garbage
// collector, node lifecycle) and kube-scheduler.
func (b *Bed) startControllers(ctx context.Context) error {
	caFile := b.path("ca.crt")
	if err := os.WriteFile(caFile, b.Config.CAData, 0o644); err != nil {
		return err
	}
	kcm := &localcluster.Process{
		Name: "kube-controller-manager",
		Path: filepath.Join(b.opts.Testbin, "kube-controller-manager"),
		Args: []string{
			"--kubeconfig=" + b.Kubeconfig,
			"--leader-elect=false",
			"--use-service-account-credentials=false",
			"--bind-address=127.0.0.1",
			"--secure-port=0",
			// What kube-root-ca.crt holds: the CA pods verify the
			// apiserver with.
			"--root-ca-file=" + caFile,
		},
		LogPath: b.logPath("kube-controller-manager"),
	}
	port, err := freeport.Get()
	if err != nil {
		return err
	}
	scheduler := &localcluster.Process{
		Name: "kube-scheduler",
		Path: filepath.Join(b.opts.Assets, "kube-scheduler"),
		Args: []string{
			"--kubeconfig=" + b.Kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
		},
		LogPath: b.logPath("kube-scheduler"),
	}
	for _, p := range []*localcluster.Process{kcm, scheduler} {
		if err := p.Start(ctx, 0); err != nil {
			return err
		}
		b.Processes = append(b.Processes, p)
	}
	return nil
}
