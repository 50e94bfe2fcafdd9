// Package plugin is what quotakeeper adds to a Gatekeeper process: the quota
// builtins, registered before Gatekeeper builds its rego driver, and a setup
// function that joins Gatekeeper's own manager to give those builtins a
// Kubernetes-backed ledger. It is linked into Gatekeeper's main package by a
// one-line overlay file (hack/gatekeeper); see docs/architecture.md.
//
// Only the decision path runs inside Gatekeeper: the grant mirror (an
// informer on ResourceGrants), the ledger over AllowanceBucket status, the
// ClaimCreationPolicies the QuotaClaimPolicy template renders (an informer
// on ClaimCreationPolicies, compiled by package claimpolicies), and the
// registrations' units that denials show amounts in (an informer on
// ResourceRegistrations). The
// observer that counts objects and folds or expires reservations, and the
// controllers, run in the separate, leader-elected quotakeeper manager; every
// Gatekeeper replica may decide at once, which the ledger's compare-and-swap
// makes safe.
package plugin

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/controller"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/builtinhost"
	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/grants"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
	"github.com/quotakeeper/quotakeeper/internal/version"
)

// Install registers the builtins, adds quotakeeper's kinds to Gatekeeper's
// scheme and appends the plugin's setup (addToManager) to Gatekeeper's
// manager functions. Call it once, from an init function: Gatekeeper sets
// controllers up while its manager's caches already run, so the scheme must
// be complete before.
//
// The builtins decide against the process's one Env: Gatekeeper gives its
// driver no functions of ours, and audit evaluates under a context we do
// not make, so the Env is the one handed to Register, and addToManager fills
// it in.
func Install(scheme *runtime.Scheme) {
	utilruntime.Must(quotav1alpha1.AddToScheme(scheme))
	env := &atomic.Pointer[builtins.Env]{}
	utilruntime.Must(builtins.Register(env.Load))
	controller.AddToManagerFuncs = append(controller.AddToManagerFuncs, func(mgr manager.Manager) error {
		return addToManager(mgr, env)
	})
	if !wrapPolicyWebhook() {
		// Without the wrapper a QuotaBypass would be neither audited nor
		// ended on time when the manager is down: refuse to run.
		panic("quotakeeper: Gatekeeper's validation webhook (webhook.AddPolicyWebhook) is not among its webhook functions; this Gatekeeper version is not supported")
	}
}

// addToManager builds what the builtins decide against and hands it to them
// through env, the process's Env (Install), with package builtinhost: at
// once the deadline, the units and the counted policy versions; the ledger
// once the grant mirror has synced, and the ClaimCreationPolicies once their
// informer has. Until then they halt, so admission fails closed rather than
// deciding against limits computed from grants not yet seen, or without a
// policy.
//
// It logs the plugin's version: Install runs in an init function, before
// Gatekeeper has set its logger, so the line would be lost there.
func addToManager(mgr manager.Manager, env *atomic.Pointer[builtins.Env]) error {
	settings, source, err := loadSettings()
	if err != nil {
		return err
	}
	mgr.GetLogger().WithName("quotakeeper").Info("quotakeeper plugin installed", "version", version.Version, "settings", source,
		"systemNamespace", settings.SystemNamespace, "reservationTTL", settings.ReservationTTL.Duration.String(), "deadline", settings.Deadline.Duration.String(),
		"capacityLeases", settings.Leased())
	// Gatekeeper's Prometheus exporter serves the default gatherer
	// (promhttp.Handler) on its --prometheus-port: registered there, the
	// plugin's metrics appear next to Gatekeeper's own.
	if err := metrics.RegisterGatekeeper(prometheus.DefaultRegisterer); err != nil {
		return fmt.Errorf("quotakeeper metrics: %w", err)
	}
	opts := []ledger.Option{ledger.WithReservationTTL(settings.ReservationTTL.Duration)}
	if settings.Leased() {
		opts = append(opts, ledger.WithLeases(settings.LeaseOptions(builtinhost.LeaseHolder())))
	}
	l, m, err := grants.NewLedger(mgr, settings.SystemNamespace, opts...)
	if err != nil {
		return fmt.Errorf("quotakeeper ledger: %w", err)
	}
	// The QuotaBypasses the validation handler's auditor reads (bypass.go),
	// informed from now on so the first admission does not wait for a list.
	if _, err := mgr.GetCache().GetInformer(context.Background(), &quotav1alpha1.QuotaBypass{}, cache.BlockUntilSynced(false)); err != nil {
		return fmt.Errorf("quotakeeper: QuotaBypass informer: %w", err)
	}
	policies, err := builtinhost.ClaimPolicies(mgr, settings.SystemNamespace)
	if err != nil {
		return fmt.Errorf("quotakeeper: %w", err)
	}
	if err := builtinhost.Setup(mgr, env, builtinhost.Options{
		Ledger: l, Mirror: m, ClaimPolicies: policies,
		SystemNamespace: settings.SystemNamespace, Deadline: settings.Deadline.Duration,
	}); err != nil {
		return fmt.Errorf("quotakeeper: %w", err)
	}
	return nil
}
