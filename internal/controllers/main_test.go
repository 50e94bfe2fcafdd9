package controllers_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/grants"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/test/managertest"
)

// The suite runs the quotakeeper manager (controllers and webhooks, leader
// elected) against a real kube-apiserver, beside a second process-like
// manager standing in for the observer (package observer, which
// cmd/quotakeeper-manager adds and this suite does not): its own cache,
// grant mirror and kubestore ledger, through which a test counts the
// Granted claims as the observer would (observeClaims). The two share
// nothing but the apiserver.
var (
	env *managertest.Env
	k8s client.Client
	obs *observerStandIn
	mgr *managertest.Run
)

const (
	sysNS = quotav1alpha1.DefaultSystemNamespace
	// rtConfigMaps is a namespace-consumed resource type (a registration
	// of the suite's own).
	rtConfigMaps = "core/configmaps"
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
	ctx := context.Background()
	var err error
	if env, err = managertest.StartEnv(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s = env.Client
	if obs, err = startObserverStandIn(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer obs.stop()
	if mgr, err = startManager(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { mgr.Stop() }()
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

// The observer stand-in acts as a service account of its own, as the
// observer would in a cluster (the manager's is managertest.ManagerUser).
const observerUser = "system:serviceaccount:quotakeeper-system:quotakeeper-observer"

func configAs(user string) *rest.Config { return managertest.ConfigAs(env.Config, user) }

func startManager() (*managertest.Run, error) { return env.StartManager() }

// restartManager stops the manager, runs whileDown, and starts a new one.
func restartManager(t *testing.T, whileDown func()) {
	t.Helper()
	mgr.Stop()
	whileDown()
	var err error
	if mgr, err = startManager(); err != nil {
		t.Fatalf("restart manager: %v", err)
	}
}

// observerStandIn is a process of its own with the ledger the observer
// would have: a cache, a grant mirror and a kubestore ledger.
type observerStandIn struct {
	ledger *ledger.Ledger
	cancel context.CancelFunc
	done   chan error
}

func startObserverStandIn() (*observerStandIn, error) {
	m, err := ctrl.NewManager(configAs(observerUser), ctrl.Options{
		Scheme:                 scheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, err
	}
	l, mi, err := grants.NewLedger(m, sysNS)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := &observerStandIn{ledger: l, cancel: cancel, done: make(chan error, 1)}
	go func() { o.done <- m.Start(ctx) }()
	if err := grants.WaitForSync(timeoutCtx(60*time.Second), mi); err != nil {
		o.stop()
		return nil, fmt.Errorf("observer stand-in's mirror did not sync: %w", err)
	}
	return o, nil
}

func (o *observerStandIn) stop() {
	o.cancel()
	<-o.done //nolint:errcheck // stopping is the point; how the run ended is not this test's concern
}

func timeoutCtx(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() { <-ctx.Done(); cancel() }()
	return ctx
}
