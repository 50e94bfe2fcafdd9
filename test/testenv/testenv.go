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
	"os"
	"path/filepath"
	"runtime"
	"sort"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// Env is a running control plane.
type Env struct {
	// Config reaches the kube-apiserver as an administrator.
	Config *rest.Config
	// Client is a controller-runtime client that knows quotakeeper's kinds.
	Client client.Client

	env *envtest.Environment
}

// RepoRoot is the directory that holds go.mod.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
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

// AssetsDir finds the directory holding kube-apiserver and etcd.
func AssetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, requireBinaries(dir)
	}
	matches, _ := filepath.Glob(filepath.Join(RepoRoot(), "bin", "testbin", "k8s-*"))
	sort.Strings(matches)
	for i := len(matches) - 1; i >= 0; i-- {
		if requireBinaries(matches[i]) == nil {
			return matches[i], nil
		}
	}
	return "", fmt.Errorf("no kube-apiserver and etcd under bin/testbin: run 'make testbin' (or 'make test', which builds them)")
}

func requireBinaries(dir string) error {
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("%s missing in %s: run 'make testbin'", name, dir)
		}
	}
	return nil
}

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
