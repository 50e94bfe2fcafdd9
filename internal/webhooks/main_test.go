package webhooks_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/managertest"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// The webhooks' behaviour suite runs the quotakeeper manager (controllers
// and webhooks, leader elected, as test/managertest builds it) against a
// real kube-apiserver that calls the webhooks, as the controllers' suite
// does: a webhook judges against what the controllers write (a
// registration's Active condition, a grant's), so they run too. The unit
// tests of the package (package webhooks) run without it, in -short mode
// and when fuzzing.
var (
	env *testenv.Env
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
	level := zapcore.ErrorLevel
	if os.Getenv("QUOTAKEEPER_TEST_LOG") != "" {
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(level)))
	var err error
	if env, err = testenv.Start(testenv.TestCRDs()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s = env.Client
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sysNS}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	wh, err := managertest.InstallWebhooks(env.Config)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = wh.Cleanup() }()
	// The QuotaEntity constraint kind and its template, which the
	// QuotaBypass webhook reads to tell a quota constraint from any other,
	// and the QuotaClaimPolicy kind the claim-policy controller writes.
	for _, name := range []string{"quotaentity", "quotaclaimpolicy"} {
		if _, _, err := testenv.InstallConstraintCRD(ctx, env.Config, name); err != nil {
			fmt.Fprintf(os.Stderr, "install the %s constraint kind: %v\n", name, err)
			return 1
		}
	}
	if err := testenv.InstallTemplateObjects(ctx, env.Config, "quotaentity"); err != nil {
		fmt.Fprintln(os.Stderr, "install the quotaentity template:", err)
		return 1
	}
	mgr, err := managertest.Start(env.Config, wh)
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
