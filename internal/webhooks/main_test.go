package webhooks_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/managertest"
)

// The webhooks' behaviour suite runs the quotakeeper manager (controllers
// and webhooks, leader elected, as test/managertest builds it) against a
// real kube-apiserver that calls the webhooks, as the controllers' suite
// does: a webhook judges against what the controllers write (a
// registration's Active condition, a grant's), so they run too. The unit
// tests of the package (package webhooks) run without it, in -short mode
// and when fuzzing.
var (
	env *managertest.Env
	k8s client.Client
)

// settle bounds how long the manager may take to converge (a registration
// turning Active); the margin is for a loaded two-core machine running the
// race detector.
const settle = 30 * time.Second

const (
	sysNS = quotav1alpha1.DefaultSystemNamespace
	// rtConfigMaps is a namespace-consumed resource type (a registration of
	// the suite's own).
	rtConfigMaps = "core/configmaps"
)

var ctx = context.Background()

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() || fuzzing() {
		os.Exit(m.Run())
	}
	os.Exit(runSuite(m))
}

// fuzzing reports whether this run fuzzes (make fuzz), whose workers run
// TestMain too and need no control plane.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

func runSuite(m *testing.M) int {
	var err error
	if env, err = managertest.StartEnv(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s = env.Client
	mgr, err := env.StartManager()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer mgr.Stop()
	reg := builders.Registration("configmaps-per-namespace", rtConfigMaps).Consumer(quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"}).
		Type(quotav1alpha1.RegistrationTypeEntity).BaseUnit("configmap").ClaimingResources(quotav1alpha1.GroupKind{Kind: "ConfigMap"}).Obj()
	if err := k8s.Create(ctx, reg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// needEnv skips an envtest test in -short mode.
func needEnv(t *testing.T) {
	t.Helper()
	if env == nil {
		t.Skip("needs a control plane; skipped in -short mode")
	}
}
