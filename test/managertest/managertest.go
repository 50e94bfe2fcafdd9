// Package managertest runs the quotakeeper manager (controllers and
// webhooks, leader elected) inside a test process against an envtest
// control plane, as cmd/quotakeeper-manager builds it, for the envtest
// suites of internal/controllers/ and internal/webhooks/: the control plane
// as a cluster has it before the manager starts (StartEnv), the manager
// (Start), and the creation of an object the manager makes Active
// (CreateActive). It does not add the observer (package observer); a suite
// that needs what the observer counts stands one in of its own.
package managertest

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/controllers"
	"github.com/quotakeeper/quotakeeper/internal/grants"
	"github.com/quotakeeper/quotakeeper/internal/webhooks"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// The manager acts as a service account of its own (impersonated by the
// envtest administrator), as it would in a cluster.
const ManagerUser = "system:serviceaccount:quotakeeper-system:quotakeeper-manager"

// ConfigAs is cfg impersonating user (in system:masters, so RBAC is not
// what a suite tests).
func ConfigAs(cfg *rest.Config, user string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	return cfg
}

// InstallWebhooks registers the manager's webhook configurations
// (config/webhook/manifests.yaml) with the apiserver of cfg, pointing at a
// local port and certificate the manager Start serves on. Cleanup removes
// them.
func InstallWebhooks(cfg *rest.Config) (*envtest.WebhookInstallOptions, error) {
	wh := &envtest.WebhookInstallOptions{
		LocalServingHost: "127.0.0.1",
		Paths:            []string{filepath.Join(testenv.RepoRoot(), "config", "webhook", "manifests.yaml")},
	}
	if err := wh.Install(cfg); err != nil {
		return nil, fmt.Errorf("install webhooks: %w", err)
	}
	return wh, nil
}

// WebhookOptions are the webhooks' options every suite runs with: the
// groups that may move a namespace between consumers and that may bypass
// quota.
var WebhookOptions = webhooks.Options{
	ConsumerLabelGroups: []string{"system:masters", "platform-admins"},
	BypassGroups:        []string{"system:masters", "incident-commanders"},
}

// Run is one run of the manager.
type Run struct {
	cancel context.CancelFunc
	done   chan error
	// Client is the manager's own (cached, indexed) client.
	Client client.Client
}

// Start runs the manager as ManagerUser with the controllers and the
// webhooks (served where wh says), and returns once it leads and its
// webhook server serves.
func Start(cfg *rest.Config, wh *envtest.WebhookInstallOptions) (*Run, error) {
	m, err := ctrl.NewManager(ConfigAs(cfg, ManagerUser), ctrl.Options{
		Scheme:                        scheme.Scheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              "quotakeeper-manager.quota.miloapis.com",
		LeaderElectionNamespace:       quotav1alpha1.DefaultSystemNamespace,
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhook.NewServer(webhook.Options{Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir}),
		// Restarts build the same controllers again in this process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	// One ledger per process, built here and passed down, as main does.
	l, mirror, err := grants.NewLedger(m, quotav1alpha1.DefaultSystemNamespace)
	if err != nil {
		return nil, err
	}
	if err := controllers.Setup(m, controllers.Options{Ledger: l, Mirror: mirror}); err != nil {
		return nil, err
	}
	opts := WebhookOptions
	opts.Ledger, opts.GrantsSynced = l, mirror.HasSynced
	if err := webhooks.Setup(m, opts); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &Run{cancel: cancel, done: make(chan error, 1), Client: m.GetClient()}
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
		run.Stop()
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

// Stop stops the manager and waits until it has: its controllers, caches,
// webhook server and lease are gone when Stop returns.
func (r *Run) Stop() {
	r.cancel()
	<-r.done //nolint:errcheck // stopping is the point; how the run ended is not the suite's concern
}
