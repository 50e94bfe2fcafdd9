// Command quotakeeper-manager runs quotakeeper's companion controllers and
// the webhooks for its own kinds, in one leader-elected manager. The
// admission side (the quota builtins) runs inside Gatekeeper, or, for a
// stock Gatekeeper, here, behind the External Data provider
// (--external-data-bind-address).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/builtinhost"
	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/claimpolicies"
	"github.com/quotakeeper/quotakeeper/internal/controllers"
	"github.com/quotakeeper/quotakeeper/internal/externaldata"
	"github.com/quotakeeper/quotakeeper/internal/grants"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
	"github.com/quotakeeper/quotakeeper/internal/observer"
	"github.com/quotakeeper/quotakeeper/internal/servingcert"
	"github.com/quotakeeper/quotakeeper/internal/version"
	"github.com/quotakeeper/quotakeeper/internal/webhooks"
)

// The manager's own permissions, beyond what the controllers declare
// (docs/operations.md, "Permissions, reviewed"): its leader-election lease
// and the event leader election records when it takes the lease (the
// GrantCreationPolicy controller declares its own events), and the
// certificate rotator's Secret (which the webhook server and the provider
// watch for their certificate) and webhook configurations (it writes the CA
// bundle into them). The rotator lists the webhook configurations, the
// Providers and its namespace's Secrets (cert-controller caches each kind
// whole), but writes only its own, by name: whoever holds the manager's
// token cannot switch off or redirect anyone else's webhook.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=quotakeeper-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=quotakeeper-system
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch,namespace=quotakeeper-system
// +kubebuilder:rbac:groups="",resources=secrets,resourceNames=quotakeeper-webhook-server-cert,verbs=update,namespace=quotakeeper-system
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=quotakeeper-validating-webhook-configuration,verbs=update;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,resourceNames=quotakeeper-mutating-webhook-configuration,verbs=update;patch
// With --external-data-bind-address the rotator keeps the CA bundle of
// Gatekeeper's Provider object too, and the provider reads Gatekeeper's CA
// from Gatekeeper's ValidatingWebhookConfiguration (above), never from
// Gatekeeper's Secret, which holds the CA's private key.
// +kubebuilder:rbac:groups=externaldata.gatekeeper.sh,resources=providers,verbs=get;list;watch
// +kubebuilder:rbac:groups=externaldata.gatekeeper.sh,resources=providers,resourceNames=quotakeeper,verbs=update;patch
// The metrics endpoint authenticates its callers' tokens and asks the API
// server whether they may get /metrics (controller-runtime's filters).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// The observer's reads: the quota templates and their constraints and the
// namespaces (their labels name consumers). The kinds the constraints match
// are known only at run time: the manager reads them through the aggregated
// ClusterRole quotakeeper-manager-counted-kinds (config/rbac/counted_kinds.yaml),
// one small ClusterRole per kind, never a wildcard (docs/operations.md,
// "Permissions the manager needs").
//
// With --object-claims it writes a ResourceClaim view of each counted
// object, and removes the views of objects gone.
// +kubebuilder:rbac:groups=quota.miloapis.com,resources=resourceclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=quota.miloapis.com,resources=resourceclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=templates.gatekeeper.sh,resources=constrainttemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=constraints.gatekeeper.sh,resources=*,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

type flags struct {
	metricsAddr, probeAddr      string
	metricsSecure               bool
	pprofAddr                   string
	leaderElect                 bool
	leaderElectionID            string
	leaderElectionNamespace     string
	systemNamespace             string
	consumerLabelGroups         string
	consumerLabelKeys           string
	bypassGroups                string
	maxBypassDuration           time.Duration
	reservationTTL              time.Duration
	capacityLeases              bool
	leaseShare, leaseMinCreates int64
	webhookPort                 int
	certDir                     string
	disableCertRotation         bool
	webhookNamespace            string
	webhookService              string
	webhookSecret               string
	validatingConfiguration     string
	mutatingConfiguration       string
	claimConcurrency            int
	effectiveRefresh            time.Duration
	observerResync              time.Duration
	observerWriteInterval       time.Duration
	sumBarrier                  time.Duration
	objectClaims                bool
	objectClaimsQPS             float64
	externalDataAddr            string
	externalDataProvider        string
	externalDataClientCA        string
	externalDataClientCASecret  string
	externalDataClientCAWebhook string
	externalDataClientNames     string
	externalDataAnyClient       bool
	externalDataDeadline        time.Duration
}

func parseFlags() flags {
	var f flags
	flag.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", `Address the metrics endpoint binds to; "0" turns it off.`)
	flag.BoolVar(&f.metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS (with the webhook certificate) to callers whose token the API server authenticates and authorizes to get the non-resource URL /metrics (the chart's ClusterRole quotakeeper-metrics-reader); =false serves plain HTTP to anyone.")
	flag.StringVar(&f.pprofAddr, "pprof-bind-address", "", `Address Go's profiler (/debug/pprof/) binds to, for finding where the manager's CPU goes (make load -pprof); empty turns it off.`)
	flag.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "Address the health and readiness probes bind to.")
	flag.BoolVar(&f.leaderElect, "leader-elect", true, "Elect a leader, so only one replica runs the controllers (webhooks are served by every replica).")
	flag.StringVar(&f.leaderElectionID, "leader-election-id", "quotakeeper-manager.quota.miloapis.com", "Name of the leader-election lease.")
	flag.StringVar(&f.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader-election lease; default the manager's own namespace (in-cluster).")
	flag.StringVar(&f.consumerLabelGroups, "consumer-label-groups", "system:masters", "Comma-separated groups whose members may add, change or remove a namespace's consumer labels (the labels that say which consumer pays for it); nobody else may.")
	flag.StringVar(&f.consumerLabelKeys, "consumer-label-keys", "", "Comma-separated namespace labels guarded like consumer labels besides those of the registered consumer kinds (for constraints with a labelKey of their own).")
	flag.StringVar(&f.bypassGroups, "bypass-groups", "system:masters", "Comma-separated groups whose members may create, change or delete a QuotaBypass (the break-glass procedure: quota denials of the constraints it names become warnings for a while); nobody else may.")
	flag.DurationVar(&f.maxBypassDuration, "max-bypass-duration", webhooks.DefaultMaxBypassDuration, "Longest spec.duration a QuotaBypass may have.")
	flag.StringVar(&f.systemNamespace, "system-namespace", quotav1alpha1.DefaultSystemNamespace, "Namespace of the buckets and grants of consumers that are neither a namespace nor inside one.")
	flag.BoolVar(&f.capacityLeases, "capacity-leases", true, "With --external-data-bind-address: the provider admits creates inside per-replica leases of a bucket's headroom, recorded asynchronously (docs/architecture.md, \"Capacity leases\"); =false turns them off.")
	flag.Int64Var(&f.leaseShare, "capacity-lease-share", 0, "With --capacity-leases: a lease is 1/share of a bucket's headroom (default 16).")
	flag.Int64Var(&f.leaseMinCreates, "capacity-lease-min-creates", 0, "With --capacity-leases: no lease smaller than this many of the bucket's largest create (default 32).")
	flag.DurationVar(&f.reservationTTL, "reservation-ttl", ledger.DefaultReservationTTL, "Lifetime of the reservations the claim controller makes for the Allocation claims it grants. Reservations made at admission carry their own expiry.")
	flag.IntVar(&f.webhookPort, "webhook-port", 9443, "Port the webhook server listens on.")
	flag.StringVar(&f.certDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory of the webhook serving certificate (tls.crt, tls.key): the servers read it with --disable-cert-rotation; with rotation they read the certificate from the Secret --webhook-secret-name, mounted here, whose files the rotator still waits for.")
	flag.BoolVar(&f.disableCertRotation, "disable-cert-rotation", false, "Do not generate and rotate the webhook certificate; something else (cert-manager) puts it in --cert-dir and the CA bundle in the webhook configurations.")
	flag.StringVar(&f.webhookNamespace, "webhook-namespace", "", "Namespace of the webhook Service and certificate Secret; default --system-namespace.")
	flag.StringVar(&f.webhookService, "webhook-service-name", "quotakeeper-webhook-service", "Name of the webhook Service (the certificate's DNS name).")
	flag.StringVar(&f.webhookSecret, "webhook-secret-name", "quotakeeper-webhook-server-cert", "Name of the Secret that holds the webhook certificate.")
	flag.StringVar(&f.validatingConfiguration, "validating-webhook-configuration", "quotakeeper-validating-webhook-configuration", "ValidatingWebhookConfiguration whose CA bundle the rotator keeps.")
	flag.StringVar(&f.mutatingConfiguration, "mutating-webhook-configuration", "quotakeeper-mutating-webhook-configuration", "MutatingWebhookConfiguration whose CA bundle the rotator keeps.")
	flag.IntVar(&f.claimConcurrency, "claim-concurrency", 4, "Claims decided at once.")
	flag.DurationVar(&f.effectiveRefresh, "effective-grant-refresh", controllers.DefaultEffectiveRefresh, "Longest a change of usage alone waits before a consumer's EffectiveResourceGrants show it (a change of limit shows at once), per 20 namespaces of the consumer: each refresh rewrites the effective grant in every one of them.")
	flag.DurationVar(&f.observerResync, "observer-resync", 5*time.Minute, "How often the observer evaluates every object again, correcting whatever an event missed.")
	flag.DurationVar(&f.observerWriteInterval, "observer-write-interval", 250*time.Millisecond, "Least time between two writes of one bucket's observed usage.")
	flag.DurationVar(&f.sumBarrier, "sum-barrier", 70*time.Second, "How long after the observer first sees a sum (create reservations a bucket compacted while nothing folded them) it may free it, behind a barrier that proves every object behind it counted. Keep it above the API server's --request-timeout (default 60s).")
	flag.BoolVar(&f.objectClaims, "object-claims", true, "Write one ResourceClaim per counted object and consumer whose claim asks for one (every QuotaClaimPolicy's; a QuotaEntity's or QuotaAllocation's with parameters.claimViews), labelled quota.miloapis.com/view=true, as a view of what it counts (deleting one frees nothing; the observer writes it again). Each costs two writes when its object is first counted.")
	flag.Float64Var(&f.objectClaimsQPS, "object-claims-qps", 20, "Most ResourceClaim view writes per second (a client of their own: bucket writes never wait for them).")
	flag.StringVar(&f.externalDataAddr, "external-data-bind-address", "", `Address the External Data provider listens on (HTTPS, with the webhook certificate), for a stock Gatekeeper running the templates' External Data twins; empty turns it off (docs/operations.md#stock-gatekeeper-external-data).`)
	flag.StringVar(&f.externalDataProvider, "external-data-provider", "quotakeeper", "Name of Gatekeeper's Provider object for the External Data provider, whose CA bundle the certificate rotator keeps.")
	flag.StringVar(&f.externalDataClientCA, "external-data-client-ca", "", "PEM file of the CA that signed Gatekeeper's certificate: when set, the provider answers only a client presenting a certificate it signed (mTLS; Gatekeeper presents its webhook certificate to providers).")
	flag.StringVar(&f.externalDataClientCASecret, "external-data-client-ca-secret", "", "namespace/name of a Secret whose ca.crt signed Gatekeeper's certificate: as --external-data-client-ca, read from the API server and followed as Gatekeeper rotates it. Prefer --external-data-client-ca-webhook: Gatekeeper's own Secret holds its CA's private key too.")
	flag.StringVar(&f.externalDataClientCAWebhook, "external-data-client-ca-webhook", "", "ValidatingWebhookConfiguration whose CA bundle signed Gatekeeper's certificate (Gatekeeper's gatekeeper-validating-webhook-configuration, which its rotator keeps): as --external-data-client-ca, read from the API server and followed as Gatekeeper rotates it.")
	flag.StringVar(&f.externalDataClientNames, "external-data-client-names", "", "Comma-separated DNS names one of which Gatekeeper's client certificate must carry (its webhook Service's, gatekeeper-webhook-service.<namespace>.svc): with a client CA, the provider authorizes its caller, not only the certificate's chain. Empty: any certificate the client CA signed.")
	flag.BoolVar(&f.externalDataAnyClient, "external-data-allow-any-client", false, "Serve the provider without a client CA: any pod that reaches it may reserve in any bucket and read any consumer's usage. Without it the manager refuses to start a provider that has no client CA.")
	flag.DurationVar(&f.externalDataDeadline, "external-data-deadline", 4*time.Second, "Longest a quota.reserve call the provider answers waits for the ledger before it denies and undoes what it wrote; keep it below the Provider's spec.timeout.")
	printVersion := flag.Bool("version", false, "Print the version and exit.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	if *printVersion {
		fmt.Println(version.String("quotakeeper-manager"))
		os.Exit(0)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if f.webhookNamespace == "" {
		f.webhookNamespace = f.systemNamespace
	}
	return f
}

func main() {
	uninstallCommand()
	if err := run(parseFlags()); err != nil {
		ctrl.Log.Error(err, "manager failed")
		os.Exit(1)
	}
}

func run(f flags) error {
	if err := webhooks.CheckConsumerLabelKeys(splitList(f.consumerLabelKeys)); err != nil {
		return fmt.Errorf("--consumer-label-keys: %w", err)
	}
	holdHeapUnderLimit(memlimit.FromCgroup, ctrl.Log.WithName("memlimit"))
	// Before any Rego driver exists (the observer's): drivers copy OPA's
	// builtin table when built. No process Env: the observer's evaluations,
	// the only ones here, carry their own.
	if err := builtins.Register(nil); err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), quotav1alpha1.AddToScheme(scheme)); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	// The webhook server and the provider present the rotator's certificate
	// from its Secret, not from the Secret's volume (package servingcert).
	serving := servingcert.New(servingcert.Options{
		Rotate:   !f.disableCertRotation,
		Secret:   types.NamespacedName{Namespace: f.webhookNamespace, Name: f.webhookSecret},
		Service:  f.webhookService,
		CertDir:  f.certDir,
		Webhooks: rotatedWebhooks(f),
	})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		// The observer caches every object a quota constraint matches;
		// their managedFields are most of a small object's bytes and no
		// policy or controller here reads them.
		Cache:                         cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
		Metrics:                       metricsOptions(f, serving),
		HealthProbeBindAddress:        f.probeAddr,
		PprofBindAddress:              f.pprofAddr,
		LeaderElection:                f.leaderElect,
		LeaderElectionID:              f.leaderElectionID,
		LeaderElectionNamespace:       f.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhook.NewServer(webhook.Options{Port: f.webhookPort, CertDir: f.certDir, TLSOpts: serving.TLSOpts()}),
	})
	if err != nil {
		return err
	}
	// Served on --metrics-bind-address next to controller-runtime's own
	// (controller_runtime_reconcile_errors_total and the rest); the bucket
	// gauges read the manager's cache at scrape time.
	if err := metrics.RegisterManager(ctrlmetrics.Registry, mgr.GetCache()); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	// The process's one ledger: the controllers and the observer share its
	// grant mirror, live client and write queues.
	opts := []ledger.Option{ledger.WithReservationTTL(f.reservationTTL)}
	if f.capacityLeases && f.externalDataAddr != "" {
		// Taken and recorded by the provider's host (builtinhost), on every
		// replica: leader election plays no part in admission.
		opts = append(opts, ledger.WithLeases(ledger.LeaseOptions{
			Holder: builtinhost.LeaseHolder(), Share: f.leaseShare, MinCreates: f.leaseMinCreates,
		}))
	}
	l, m, err := grants.NewLedger(mgr, f.systemNamespace, opts...)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	if err := controllers.Setup(mgr, controllers.Options{
		SystemNamespace: f.systemNamespace, Ledger: l, Mirror: m, ClaimConcurrency: f.claimConcurrency,
		EffectiveRefresh: f.effectiveRefresh,
	}); err != nil {
		return err
	}
	// One set of ClaimCreationPolicies too: the observer renders them, and
	// so does the External Data provider.
	policies, err := builtinhost.ClaimPolicies(mgr, f.systemNamespace)
	if err != nil {
		return err
	}
	if err := addObserver(mgr, f, l, m, policies); err != nil {
		return fmt.Errorf("observer: %w", err)
	}
	// What the provider's builtins decide against (it reserves through the
	// process's one ledger); never the process's Env: the observer's
	// evaluations carry their own.
	providerEnv := &atomic.Pointer[builtins.Env]{}
	if f.externalDataAddr != "" {
		if err := metrics.RegisterAdmission(ctrlmetrics.Registry); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		if err := builtinhost.Setup(mgr, providerEnv, builtinhost.Options{
			Ledger: l, Mirror: m, ClaimPolicies: policies,
			SystemNamespace: f.systemNamespace, Deadline: f.externalDataDeadline,
		}); err != nil {
			return fmt.Errorf("external data provider: %w", err)
		}
	}

	clientCA, err := externalDataClientCA(f, mgr.GetAPIReader())
	if err != nil {
		return err
	}

	if err := serving.Add(mgr); err != nil {
		return err
	}
	if err := webhooks.Setup(mgr, webhooks.Options{
		SystemNamespace:     f.systemNamespace,
		ConsumerLabelGroups: splitList(f.consumerLabelGroups),
		ConsumerLabelKeys:   splitList(f.consumerLabelKeys),
		BypassGroups:        splitList(f.bypassGroups),
		MaxBypassDuration:   f.maxBypassDuration,
		NamespaceMoves:      &observer.MoveCounter{Reader: mgr.GetAPIReader(), Mapper: mgr.GetRESTMapper(), ClaimPolicies: policies},
		Ledger:              l,
		GrantsSynced:        m.HasSynced,
	}); err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	if f.externalDataAddr != "" {
		if err := mgr.Add(&externaldata.Server{Addr: f.externalDataAddr, CertDir: f.certDir, TLSOpts: serving.TLSOpts(),
			ClientCA: clientCA, ClientNames: splitList(f.externalDataClientNames), AllowAnyClient: f.externalDataAnyClient,
			Env: providerEnv.Load, Log: ctrl.Log.WithName("external-data")}); err != nil {
			return fmt.Errorf("external data provider: %w", err)
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting manager", "version", version.Version, "systemNamespace", f.systemNamespace)
	return mgr.Start(ctx)
}

// rotatedWebhooks are the objects whose CA bundle the rotator keeps: the
// webhook configurations, and the Provider when the provider is served.
func rotatedWebhooks(f flags) []rotator.WebhookInfo {
	out := []rotator.WebhookInfo{
		{Name: f.validatingConfiguration, Type: rotator.Validating},
		{Name: f.mutatingConfiguration, Type: rotator.Mutating},
	}
	if f.externalDataAddr != "" {
		out = append(out, rotator.WebhookInfo{Name: f.externalDataProvider, Type: rotator.ExternalDataProvider})
	}
	return out
}

// addObserver adds the observer (leader only), writing through l: it
// writes only once l's grant mirror m has synced, since every write
// recomputes the bucket's limit. It renders ClaimCreationPolicies from
// policies.
func addObserver(mgr ctrl.Manager, f flags, l *ledger.Ledger, m *grants.Mirror, policies *claimpolicies.Set) error {
	o, err := observer.New(mgr, observer.Options{
		Writer: l, WriterSynced: m.HasSynced, SystemNamespace: f.systemNamespace,
		Resync: f.observerResync, WriteInterval: f.observerWriteInterval, SumBarrier: f.sumBarrier,
		ObjectClaims: f.objectClaims, ObjectClaimsQPS: float32(f.objectClaimsQPS), ClaimPolicies: policies,
	})
	if err != nil {
		return err
	}
	return mgr.Add(o)
}

// metricsOptions serve the metrics endpoint, with --metrics-secure over
// HTTPS to authenticated and authorized callers only, as kubebuilder
// scaffolds it. It presents the webhook certificate (the rotator's, or
// --cert-dir's), so a scraper can verify it with the CA bundle of the
// webhook configurations.
func metricsOptions(f flags, serving *servingcert.Certificate) metricsserver.Options {
	if !f.metricsSecure {
		return metricsserver.Options{BindAddress: f.metricsAddr}
	}
	return metricsserver.Options{
		BindAddress:    f.metricsAddr,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		CertDir:        f.certDir,
		// HTTP/1.1 only, as kubebuilder scaffolds it: HTTP/2's stream
		// reset and rapid reset attacks (CVE-2023-44487, CVE-2023-39325)
		// reach an endpoint before it authenticates anyone.
		TLSOpts: append(serving.TLSOpts(), func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }),
	}
}

// externalDataClientCA is where the provider reads the CA of Gatekeeper's
// client certificate: a file, a Secret, a webhook configuration's CA
// bundle, or none (no mTLS, which the provider refuses unless
// --external-data-allow-any-client).
func externalDataClientCA(f flags, reader client.Reader) (func(context.Context) ([]byte, error), error) {
	given := 0
	for _, v := range []string{f.externalDataClientCA, f.externalDataClientCASecret, f.externalDataClientCAWebhook} {
		if v != "" {
			given++
		}
	}
	switch {
	case given > 1:
		return nil, errors.New("--external-data-client-ca, --external-data-client-ca-secret and --external-data-client-ca-webhook: give one")
	case f.externalDataClientCAWebhook != "":
		return externaldata.ClientCAWebhook(reader, f.externalDataClientCAWebhook), nil
	case f.externalDataClientCA != "":
		return externaldata.ClientCAFile(f.externalDataClientCA), nil
	case f.externalDataClientCASecret != "":
		namespace, name, ok := strings.Cut(f.externalDataClientCASecret, "/")
		if !ok || namespace == "" || name == "" {
			return nil, fmt.Errorf("--external-data-client-ca-secret=%q: want namespace/name", f.externalDataClientCASecret)
		}
		return externaldata.ClientCASecret(reader, types.NamespacedName{Namespace: namespace, Name: name}), nil
	}
	return nil, nil
}

// splitList splits a comma-separated flag value, dropping empty items; an
// empty value is an empty (not nil) list.
func splitList(s string) []string {
	out := []string{}
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
