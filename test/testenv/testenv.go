// Package testenv runs a real etcd and kube-apiserver (controller-runtime's
// envtest) with quotakeeper's CRDs installed, for integration tests.
//
// The binaries are the ones `make testbin` builds from Go module sources into
// bin/; envtest finds them through KUBEBUILDER_ASSETS, which the Makefile
// exports. When run outside make, the repository's bin/ directory is searched.
// A missing binary fails the test: a skipped integration suite would let
// `make test` pass without testing anything.
package testenv

import (
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/checkout"
)

// Env is a running control plane.
type Env struct {
	// Config reaches the kube-apiserver as an administrator.
	Config *rest.Config
	// Client is a controller-runtime client that knows quotakeeper's kinds.
	Client client.Client

	env *envtest.Environment
}

// RepoRoot is the directory that holds go.mod: the checkout the test runs
// in (go test runs it in its package's directory).
func RepoRoot() string {
	root, err := checkout.Root()
	if err != nil {
		panic(err)
	}
	return root
}

// Start brings up etcd and kube-apiserver and installs the CRDs from
// config/crd, and those in crdDirs (TestCRDs holds stand-ins for kinds of
// other projects).
func Start(crdDirs ...string) (*Env, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	if err := quotav1alpha1.AddToScheme(scheme.Scheme); err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     append([]string{filepath.Join(RepoRoot(), "config", "crd")}, crdDirs...),
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme.Scheme,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start envtest with binaries from %s: %w", assets, err)
	}
	// Integration tests drive many objects quickly; client-side throttling
	// would measure the rate limiter, not the system.
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{Config: cfg, Client: c, env: env}, nil
}

// Stop shuts the control plane down.
func (e *Env) Stop() error { return e.env.Stop() }

// TestCRDs is the directory of the CRDs tests install beside quotakeeper's:
// Organization (cluster-scoped) and Project (namespaced) in
// resourcemanager.miloapis.com, stand-ins for Milo's kinds.
func TestCRDs() string { return filepath.Join(RepoRoot(), "test", "crds") }

// GVK returns the GroupVersionKind of a quotakeeper kind.
func GVK(kind string) schema.GroupVersionKind { return quotav1alpha1.GroupVersion.WithKind(kind) }

// AssetsDir finds the directory holding kube-apiserver and etcd
// (checkout.Testbin).
func AssetsDir() (string, error) { return checkout.Testbin() }

// Kubeconfig returns a kubeconfig for a user of that name and groups,
// authenticated by a client certificate the control plane trusts, for a
// process a test runs against it (kube-controller-manager, a binary under
// test). Its permissions are what RBAC grants the user and groups.
func (e *Env) Kubeconfig(user string, groups ...string) ([]byte, error) {
	u, err := e.env.AddUser(envtest.User{Name: user, Groups: groups}, e.Config)
	if err != nil {
		return nil, err
	}
	return u.KubeConfig()
}
