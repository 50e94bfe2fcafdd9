package controllers_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/controllers"
	"github.com/quotakeeper/quotakeeper/grants"
	"github.com/quotakeeper/quotakeeper/ledger"
	"github.com/quotakeeper/quotakeeper/test/testenv"
	"github.com/quotakeeper/quotakeeper/webhooks"
)

// The suite runs the quotakeeper manager (controllers and webhooks, leader
// elected) against a real kube-apiserver, beside a second process-like
// manager standing in for Gatekeeper: its own cache, grant mirror and
// kubestore ledger, serving a validating webhook that reserves quota for
// ConfigMaps at admission, as the builtins will. The two share nothing but
// the apiserver.
var (
	env *testenv.Env
	k8s client.Client
	wh  *envtest.WebhookInstallOptions
	gk  *gatekeeperSide
	mgr *managerRun
)

const (
	sysNS = quotav1alpha1.DefaultSystemNamespace
	// reservationTTL is the admission side's TTL: short, so expiry is
	// observable in a test.
	reservationTTL = 2 * time.Second
	// rtConfigMaps is what the admission side reserves for each ConfigMap,
	// against the ConfigMap's namespace.
	rtConfigMaps = "core/configmaps"
	// reserveLabel marks the namespaces whose ConfigMaps are reserved for.
	reserveLabel = "quotakeeper-test/reserve"
	// denyAfterReserve makes the admission side deny a ConfigMap after
	// reserving for it, as a later webhook would: the object never appears.
	denyAfterReserve = "quotakeeper-test/deny-after-reserve"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Unit tests of this package still run; the envtest ones skip.
		os.Exit(m.Run())
	}
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	level := zapcore.ErrorLevel
	if os.Getenv("QUOTAKEEPER_TEST_LOG") != "" {
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(level)))
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s = env.Client
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sysNS}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	gkPort, err := testenv.FreePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	wh = &envtest.WebhookInstallOptions{
		LocalServingHost:   "127.0.0.1",
		Paths:              []string{filepath.Join(testenv.RepoRoot(), "config", "webhook", "manifests.yaml")},
		ValidatingWebhooks: []*admissionv1.ValidatingWebhookConfiguration{reserveWebhookConfiguration(gkPort)},
	}
	if err := wh.Install(env.Config); err != nil {
		fmt.Fprintln(os.Stderr, "install webhooks:", err)
		return 1
	}
	defer func() { _ = wh.Cleanup() }()
	if gk, err = startGatekeeperSide(gkPort); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer gk.stop()
	if mgr, err = startManager(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { mgr.stop() }()
	if err := createConfigMapRegistration(ctx); err != nil {
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

// managerRun is one run of the quotakeeper manager, as cmd/quotakeeper-manager
// builds it.
type managerRun struct {
	cancel context.CancelFunc
	done   chan error
}

// The manager and the admission side act as service accounts of their own
// (impersonated by the envtest administrator), as they would in a cluster,
// so the webhooks can tell the manager's requests from the tests', which
// come from the administrator.
const (
	managerUser    = "system:serviceaccount:quotakeeper-system:quotakeeper-manager"
	gatekeeperUser = "system:serviceaccount:gatekeeper-system:gatekeeper-admin"
)

func configAs(user string) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	return cfg
}

// managerClient acts as the manager does.
func managerClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(configAs(managerUser), client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func startManager() (*managerRun, error) {
	cfg := configAs(managerUser)
	m, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme.Scheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              "quotakeeper-manager.quota.miloapis.com",
		LeaderElectionNamespace:       sysNS,
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhook.NewServer(webhook.Options{Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir}),
		// Restarts build the same controllers again in this process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	if err := controllers.Setup(m, controllers.Options{ObjectPollInterval: 500 * time.Millisecond}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	me, err := webhooks.WhoAmI(ctx, cfg)
	if err != nil {
		cancel()
		return nil, err
	}
	if me != managerUser {
		cancel()
		return nil, fmt.Errorf("manager runs as %q, want %q", me, managerUser)
	}
	if err := webhooks.Setup(m, webhooks.Options{ManagerUsername: me}); err != nil {
		cancel()
		return nil, err
	}
	run := &managerRun{cancel: cancel, done: make(chan error, 1)}
	go func() { run.done <- m.Start(ctx) }()
	select {
	case <-m.Elected():
	case err := <-run.done:
		cancel()
		return nil, fmt.Errorf("manager exited: %w", err)
	case <-time.After(60 * time.Second):
		cancel()
		return nil, fmt.Errorf("manager not elected in 60s")
	}
	if err := waitWebhookServer(m.GetWebhookServer()); err != nil {
		run.stop()
		return nil, err
	}
	return run, nil
}

func waitWebhookServer(s webhook.Server) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if s.StartedChecker()(nil) == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("webhook server not serving in 30s")
}

// stop stops the manager and waits until it has: its controllers, caches,
// webhook server and lease are gone when stop returns.
func (r *managerRun) stop() {
	r.cancel()
	<-r.done //nolint:errcheck // stopping is the point; how the run ended is not this test's concern
}

// restartManager stops the manager, runs whileDown, and starts a new one.
func restartManager(t *testing.T, whileDown func()) {
	t.Helper()
	mgr.stop()
	whileDown()
	var err error
	if mgr, err = startManager(); err != nil {
		t.Fatalf("restart manager: %v", err)
	}
}

// gatekeeperSide is the admission process: what the Gatekeeper plugin runs.
type gatekeeperSide struct {
	ledger *ledger.Ledger
	mirror *grants.Mirror
	cancel context.CancelFunc
	done   chan error
}

func startGatekeeperSide(port int) (*gatekeeperSide, error) {
	m, err := ctrl.NewManager(configAs(gatekeeperUser), ctrl.Options{
		Scheme:                 scheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: wh.LocalServingCertDir}),
	})
	if err != nil {
		return nil, err
	}
	l, mi, err := grants.NewLedger(m, sysNS, ledger.WithReservationTTL(reservationTTL))
	if err != nil {
		return nil, err
	}
	m.GetWebhookServer().Register(reservePath, &webhook.Admission{Handler: &reserver{ledger: l, mirror: mi}})
	ctx, cancel := context.WithCancel(context.Background())
	g := &gatekeeperSide{ledger: l, mirror: mi, cancel: cancel, done: make(chan error, 1)}
	go func() { g.done <- m.Start(ctx) }()
	if err := grants.WaitForSync(timeoutCtx(60*time.Second), mi); err != nil {
		g.stop()
		return nil, fmt.Errorf("admission side's mirror did not sync: %w", err)
	}
	if err := waitWebhookServer(m.GetWebhookServer()); err != nil {
		g.stop()
		return nil, err
	}
	return g, nil
}

func (g *gatekeeperSide) stop() {
	g.cancel()
	<-g.done //nolint:errcheck // stopping is the point; how the run ended is not this test's concern
}

func timeoutCtx(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() { <-ctx.Done(); cancel() }()
	return ctx
}
