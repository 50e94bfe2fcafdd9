package kubestore_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// env is one real kube-apiserver and etcd shared by the package's tests and
// benchmarks; each test works in buckets of its own consumers.
var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping kubestore suite in -short mode: it needs a control plane")
		os.Exit(0)
	}
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: quotav1alpha1.DefaultSystemNamespace}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// newClient is a client with a connection of its own, as a separate replica
// would have.
func newClient(tb testing.TB) client.Client {
	tb.Helper()
	cfg := rest.CopyConfig(env.Config)
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
