// Package localcluster brings up quotakeeper as users install and run it,
// on this machine: a real etcd and kube-apiserver (from bin/testbin), the
// objects `helm template` renders of charts/quotakeeper and of Gatekeeper's
// stock chart (chart.go), one or more Gatekeeper processes built with our
// plugin behind a loopback load balancer that the ValidatingWebhookConfiguration
// points at, and the quotakeeper manager. `make run` and the end-to-end tests both use
// it. There is no container runtime here: every component is a local process.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/checkout"
	"github.com/quotakeeper/quotakeeper/internal/freeport"
)

// GatekeeperNamespace is where Gatekeeper runs, as its chart installs it.
const GatekeeperNamespace = "gatekeeper-system"

// Options describe the cluster to bring up.
type Options struct {
	// Dir holds certificates, kubeconfig and logs; it must exist.
	Dir string
	// Gatekeeper is the path of the Gatekeeper binary: built with our
	// plugin, or with ExternalData Gatekeeper's own build
	// (StockGatekeeperBinary).
	Gatekeeper string
	// ExternalData runs the second admission mode: a stock Gatekeeper
	// running the templates' External Data twins, which ask the manager's
	// provider (externaldata.go). The chart is rendered with
	// admission=externalData and Gatekeeper's with
	// config/gatekeeper/values-external-data.yaml.
	ExternalData bool
	// GatekeeperReplicas behind the load balancer; at least 1.
	GatekeeperReplicas int
	// Manager is the path of the quotakeeper manager binary; empty runs none.
	Manager string
	// ManagerArgs are extra flags for the manager.
	ManagerArgs []string
	// ManagerEnv are extra KEY=VALUE environment variables for the
	// manager, e.g. GOGC=400: what a runtime setting costs or saves.
	ManagerEnv []string
	// GatekeeperArgs are extra flags for every Gatekeeper replica.
	GatekeeperArgs []string
	// ReservationTTL is the chart's reservationTTL, which reaches
	// Gatekeeper's plugin (its settings ConfigMap) and the manager (its
	// flags); zero keeps the chart's default.
	ReservationTTL time.Duration
	// Helm renders charts/quotakeeper, whose objects the bed installs;
	// empty is HelmBinary().
	Helm string
	// AuditInterval is how often each Gatekeeper audits, in whole seconds.
	// Zero keeps the test bed's 5 s, which shows audit results quickly; a
	// load run passes Gatekeeper's own default (60 s), since audit competes
	// with admission for the CPU.
	AuditInterval time.Duration
	// ShippedRulesOnly installs Gatekeeper's webhook with the mode's values
	// file alone, whose rules send it only the kinds the shipped RBAC
	// counts. Otherwise the bed adds config/gatekeeper/values-all-kinds.yaml,
	// as a user does who counts more kinds: the samples count Secrets, the
	// suites ServiceAccounts and whatever their ClaimCreationPolicies name.
	ShippedRulesOnly bool
}

// Cluster is a running local cluster.
type Cluster struct {
	// Config reaches the apiserver as cluster administrator.
	Config *rest.Config
	// Client knows quotakeeper's kinds.
	Client client.Client
	// Kubeconfig is the path of an administrator kubeconfig for kubectl.
	Kubeconfig string
	// ManagerKubeconfig and GatekeeperKubeconfig are what the manager and
	// every Gatekeeper run with: their shipped ServiceAccounts (rbac.go).
	ManagerKubeconfig, GatekeeperKubeconfig string
	// Gatekeepers are the Gatekeeper replicas, in order.
	Gatekeepers []*Process
	// Manager is the quotakeeper manager, when one runs.
	Manager *Process
	// ControllerManager is kube-controller-manager running only the garbage
	// collector, which deletes owned ResourceClaims with their objects.
	ControllerManager *Process
	// Chart is what `helm template` renders of charts/quotakeeper (with
	// reservationTTL from Options): the bed installs its CRDs, RBAC,
	// webhook configurations and plugin settings, runs the manager with its
	// Deployment's flags, and the suites apply its SyncSet and templates.
	Chart Rendered
	// GatekeeperChart is what `helm template` renders of Gatekeeper's stock
	// chart with config/gatekeeper/values.yaml, for the control plane's
	// Kubernetes release: the bed installs its RBAC and its
	// ValidatingWebhookConfiguration.
	GatekeeperChart Rendered

	opts     Options
	env      *envtest.Environment
	webhooks envtest.WebhookInstallOptions
	balancer *Balancer
	// etcd and apiserver are envtest's processes once adopted (controlplane.go).
	etcd, apiserver *Process
	// externalDataPort is where the manager's External Data provider
	// listens (Options.ExternalData).
	externalDataPort int
}

// Start brings the cluster up. On error, everything started is stopped.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.GatekeeperReplicas < 1 {
		opts.GatekeeperReplicas = 1
	}
	gkDir, err := gatekeeperModuleDir()
	if err != nil {
		return nil, err
	}
	gkCRDs := filepath.Join(gkDir, "charts", "gatekeeper", "crds")
	assets, err := checkout.Testbin()
	if err != nil {
		return nil, err
	}
	if err := quotav1alpha1.AddToScheme(scheme.Scheme); err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts}
	if c.Chart, err = c.renderChart(); err != nil {
		return nil, err
	}
	crds, err := typed[apiextensionsv1.CustomResourceDefinition](c.Chart, "CustomResourceDefinition")
	if err != nil {
		return nil, err
	}
	c.env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDs:                  crds,
		CRDDirectoryPaths:     []string{gkCRDs},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme.Scheme,
	}
	if c.Config, err = c.env.Start(); err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	if err := c.start(ctx, gkDir); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// start runs everything after the control plane.
func (c *Cluster) start(ctx context.Context, gkDir string) error {
	var err error
	c.Config.QPS, c.Config.Burst = 1000, 2000
	if c.Client, err = client.New(c.Config, client.Options{Scheme: scheme.Scheme}); err != nil {
		return err
	}
	if c.Kubeconfig, err = c.writeKubeconfig(); err != nil {
		return err
	}
	// As helm install --create-namespace makes them: no label. Gatekeeper's
	// webhook leaves both out by name (config/gatekeeper/values.yaml).
	for _, ns := range []string{GatekeeperNamespace, quotav1alpha1.DefaultSystemNamespace} {
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	if c.GatekeeperChart, err = c.renderGatekeeperChart(gkDir); err != nil {
		return err
	}
	if err := c.installRBAC(ctx); err != nil {
		return err
	}
	// One serving certificate for 127.0.0.1 from a CA of our own, shared by
	// every replica, so the balancer can pass TLS through.
	// The manager serves quotakeeper's own webhooks on the port envtest
	// picks, with the same certificate; the chart's webhook configurations
	// are installed with only their clientConfig rewritten to that URL.
	c.webhooks = envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"}
	if c.opts.Manager != "" {
		if c.webhooks.ValidatingWebhooks, err = typed[admissionregistrationv1.ValidatingWebhookConfiguration](c.Chart, "ValidatingWebhookConfiguration"); err != nil {
			return err
		}
		if c.webhooks.MutatingWebhooks, err = typed[admissionregistrationv1.MutatingWebhookConfiguration](c.Chart, "MutatingWebhookConfiguration"); err != nil {
			return err
		}
	}
	if err := c.webhooks.PrepWithoutInstalling(); err != nil {
		return err
	}
	if c.webhooks.LocalServingCAData, err = issueServingCert(c.webhooks.LocalServingCertDir); err != nil {
		return fmt.Errorf("the bed's serving certificate: %w", err)
	}
	if err := c.webhooks.ModifyWebhookDefinitions(); err != nil { // their caBundle: this CA
		return err
	}
	if err := c.startControllerManager(ctx, c.env.BinaryAssetsDirectory); err != nil {
		return err
	}
	if err := c.WaitAggregated(ctx); err != nil {
		return err
	}
	if c.opts.ExternalData {
		// Before Gatekeeper starts, so that its readiness includes it.
		if err := c.installProvider(ctx); err != nil {
			return err
		}
		if err := c.gatekeeperCertSecret(ctx); err != nil {
			return err
		}
	}
	if err := c.startGatekeepers(ctx); err != nil {
		return err
	}
	if c.opts.Manager != "" {
		if err := c.startManager(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Stop ends every process and the control plane. The manager, the
// Gatekeeper replicas and kube-controller-manager stop side by side, each in
// its own grace period (one after another, a suite's end took half a
// minute), then the control plane they talked to.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, p := range append([]*Process{c.Manager, c.ControllerManager}, c.Gatekeepers...) {
		if p != nil {
			wg.Go(p.Stop)
		}
	}
	wg.Wait()
	if c.balancer != nil {
		_ = c.balancer.Close()
	}
	_ = c.webhooks.Cleanup()
	c.stopControlPlane()
	if c.env != nil {
		_ = c.env.Stop()
	}
}

// CAData is the CA that signed the webhook serving certificate.
func (c *Cluster) CAData() []byte { return c.webhooks.LocalServingCAData }

// CertDir holds tls.crt and tls.key for 127.0.0.1.
func (c *Cluster) CertDir() string { return c.webhooks.LocalServingCertDir }

func (c *Cluster) writeKubeconfig() (string, error) {
	return c.writeUserKubeconfig("kubeconfig", envtest.User{Name: "quotakeeper-admin", Groups: []string{"system:masters"}})
}

// writeUserKubeconfig writes a kubeconfig for user, authenticated by a client
// certificate (the manager and Gatekeeper run as their ServiceAccounts,
// rbac.go).
func (c *Cluster) writeUserKubeconfig(file string, user envtest.User) (string, error) {
	u, err := c.env.AddUser(user, c.Config)
	if err != nil {
		return "", err
	}
	data, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.opts.Dir, file)
	return path, os.WriteFile(path, data, 0o600)
}

// gatekeeperModuleDir is Gatekeeper's module directory, which holds its
// chart: its CRDs and the values its webhook configuration is made from.
func gatekeeperModuleDir() (string, error) {
	cmd := exec.Command("go", "list", "-mod=mod", "-m", "-f", "{{.Dir}}", "github.com/open-policy-agent/gatekeeper/v3")
	root, err := checkout.Root()
	if err != nil {
		return "", err
	}
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("find Gatekeeper's module directory: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(dir, "charts", "gatekeeper", "crds")); err != nil {
		return "", err
	}
	return dir, nil
}

// chartValues is what quotakeeper reads of a Gatekeeper Helm values file:
// the stock chart's, and config/gatekeeper/values.yaml.
type chartValues struct {
	Image struct {
		CRDRepository string `json:"crdRepository"`
		Release       string `json:"release"`
	} `json:"image"`
	PreInstall struct {
		CRDRepository struct {
			Image struct {
				Repository string `json:"repository"`
				Tag        string `json:"tag"`
			} `json:"image"`
		} `json:"crdRepository"`
	} `json:"preInstall"`
	WebhookTimeoutSeconds int    `json:"validatingWebhookTimeoutSeconds"`
	FailurePolicy         string `json:"validatingWebhookFailurePolicy"`
	ExtraVolumes          []struct {
		Name      string `json:"name"`
		ConfigMap *struct {
			Name     string `json:"name"`
			Optional bool   `json:"optional"`
		} `json:"configMap"`
	} `json:"extraVolumes"`
	ExtraVolumeMounts []struct {
		Name      string `json:"name"`
		MountPath string `json:"mountPath"`
	} `json:"extraVolumeMounts"`
}

func readChartValues(file string) (chartValues, error) {
	var v chartValues
	data, err := os.ReadFile(file)
	if err != nil {
		return v, err
	}
	if err := yaml.Unmarshal(data, &v); err != nil {
		return v, fmt.Errorf("%s: %w", file, err)
	}
	return v, nil
}

// stockChartValues is the values file of the chart in Gatekeeper's module.
func stockChartValues(moduleDir string) string {
	return filepath.Join(moduleDir, "charts", "gatekeeper", "values.yaml")
}

func (c *Cluster) startGatekeepers(ctx context.Context) error {
	var err error
	if c.GatekeeperKubeconfig, err = c.writeServiceAccountKubeconfig(ctx, "gatekeeper.kubeconfig", GatekeeperServiceAccount); err != nil {
		return err
	}
	var settings string
	if !c.opts.ExternalData {
		if settings, err = c.writePluginSettings(ctx); err != nil {
			return err
		}
	}
	var backends []string
	for i := range c.opts.GatekeeperReplicas {
		p, addr, err := c.gatekeeperProcess(ctx, i, settings)
		if err != nil {
			return err
		}
		c.Gatekeepers = append(c.Gatekeepers, p)
		backends = append(backends, addr)
	}
	if c.balancer, err = NewBalancer(backends); err != nil {
		return err
	}
	for _, p := range c.Gatekeepers {
		if err := p.Start(ctx, 3*time.Minute); err != nil {
			return err
		}
	}
	webhook, err := c.validatingWebhook()
	if err != nil {
		return err
	}
	return c.Client.Create(ctx, webhook)
}

// writePluginSettings installs the chart's quotakeeper-plugin ConfigMap
// and writes its settings.yaml where Gatekeeper reads it, as the volume
// config/gatekeeper/values.yaml mounts gives it to Gatekeeper in a cluster
// (docs/operations.md#plugin-settings), and returns its path.
func (c *Cluster) writePluginSettings(ctx context.Context) (string, error) {
	cm, err := c.Chart.Object("ConfigMap", PluginSettingsConfigMap)
	if err != nil {
		return "", err
	}
	settings, found, err := unstructured.NestedString(cm.Object, "data", "settings.yaml")
	if err != nil {
		return "", fmt.Errorf("ConfigMap %s: %w", PluginSettingsConfigMap, err)
	}
	if !found {
		return "", fmt.Errorf("ConfigMap %s has no data settings.yaml", PluginSettingsConfigMap)
	}
	if err := c.Apply(ctx, time.Minute, cm); err != nil {
		return "", err
	}
	path := filepath.Join(c.opts.Dir, "quotakeeper-plugin-settings.yaml")
	return path, os.WriteFile(path, []byte(settings), 0o644)
}

func (c *Cluster) gatekeeperProcess(ctx context.Context, i int, settings string) (*Process, string, error) {
	name := fmt.Sprintf("gatekeeper-%d", i)
	// Gatekeeper's status writers look their Pod up; without a kubelet it
	// simply stays Pending.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: GatekeeperNamespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: c.gatekeeperImage()}}},
	}
	if err := c.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, "", err
	}
	var ports [4]int
	for j := range ports {
		port, err := freeport.Get()
		if err != nil {
			return nil, "", err
		}
		ports[j] = port
	}
	webhook, health, metrics, prom := ports[0], ports[1], ports[2], ports[3]
	// Audit lists resources into this directory; each replica needs its own.
	auditDir := filepath.Join(c.opts.Dir, name+"-audit")
	if err := os.MkdirAll(auditDir, 0o755); err != nil {
		return nil, "", err
	}
	// As the stock chart deploys it: one process audits (its audit
	// Deployment), every replica serves the webhooks (its controller
	// manager). Replica 0 does both; were every replica to audit, each
	// would re-evaluate every object of the cluster once per interval.
	var operations []string
	if i > 0 {
		operations = []string{"--operation=webhook", "--operation=mutation-webhook"}
	}
	return &Process{
		Name: name,
		Path: c.opts.Gatekeeper,
		Args: append(append([]string{
			"--kubeconfig=" + c.GatekeeperKubeconfig,
			"--port=" + fmt.Sprint(webhook),
			"--host=127.0.0.1",
			"--cert-dir=" + c.CertDir(),
			"--disable-cert-rotation",
			"--health-addr=127.0.0.1:" + fmt.Sprint(health),
			"--metrics-addr=127.0.0.1:" + fmt.Sprint(metrics),
			"--prometheus-port=" + fmt.Sprint(prom),
			"--enable-k8s-native-validation=false",
			"--log-denies",
			"--audit-interval=" + fmt.Sprint(c.auditSeconds()),
			"--api-cache-dir=" + auditDir,
			// Gatekeeper evaluates at most this many requests at once
			// (default GOMAXPROCS). A quota check waits on a bucket write,
			// so with the default two on this machine group commit never
			// sees a batch and throughput is two writes' worth (measured:
			// 34 creates/s against 532 for in-tree ResourceQuota).
			"--max-serving-threads=" + fmt.Sprint(GatekeeperServingThreads),
		}, append(pluginFlags(settings), operations...)...), c.opts.GatekeeperArgs...),
		Env:     []string{"POD_NAMESPACE=" + GatekeeperNamespace, "POD_NAME=" + name},
		LogPath: filepath.Join(c.opts.Dir, name+".log"),
		Ready:   fmt.Sprintf("http://127.0.0.1:%d/readyz", health),
		Metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", prom),
	}, fmt.Sprintf("127.0.0.1:%d", webhook), nil
}

// validatingWebhook is the stock chart's ValidatingWebhookConfiguration
// (GatekeeperChart) with each webhook's clientConfig pointing at the
// balancer: the same rules (every resource and the subresources the chart
// lists, the scale subresources among them), failure policy, timeout,
// namespace selector and match conditions (quota objects are left to
// quotakeeper's own webhooks) as in a cluster.
func (c *Cluster) validatingWebhook() (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	configs, err := typed[admissionregistrationv1.ValidatingWebhookConfiguration](c.GatekeeperChart, "ValidatingWebhookConfiguration")
	if err != nil {
		return nil, err
	}
	for _, config := range configs {
		if config.Name != "gatekeeper-validating-webhook-configuration" {
			continue
		}
		for i := range config.Webhooks {
			cc := &config.Webhooks[i].ClientConfig
			if cc.Service == nil || cc.Service.Path == nil {
				return nil, fmt.Errorf("webhook %s calls no Service path", config.Webhooks[i].Name)
			}
			url := "https://" + c.balancer.Addr() + *cc.Service.Path
			*cc = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: c.CAData()}
		}
		return config, nil
	}
	return nil, errors.New("the Gatekeeper chart renders no ValidatingWebhookConfiguration gatekeeper-validating-webhook-configuration")
}

// startControllerManager runs the real garbage collector: without it an
// object's deletion would not delete the claims it owns.
func (c *Cluster) startControllerManager(ctx context.Context, assets string) error {
	c.ControllerManager = &Process{
		Name: "kube-controller-manager",
		Path: filepath.Join(assets, "kube-controller-manager"),
		Args: []string{
			"--kubeconfig=" + c.Kubeconfig,
			// The aggregation controller fills the manager's aggregated
			// ClusterRole (rbac.go).
			"--controllers=garbagecollector,clusterrole-aggregation",
			"--leader-elect=false",
			"--use-service-account-credentials=false",
			"--bind-address=127.0.0.1",
			"--secure-port=0",
		},
		LogPath: filepath.Join(c.opts.Dir, "kube-controller-manager.log"),
	}
	return c.ControllerManager.Start(ctx, 0)
}

func (c *Cluster) startManager(ctx context.Context) error {
	var err error
	if c.ManagerKubeconfig, err = c.writeServiceAccountKubeconfig(ctx, "manager.kubeconfig", ManagerServiceAccount); err != nil {
		return err
	}
	health, err := freeport.Get()
	if err != nil {
		return err
	}
	metrics, err := freeport.Get()
	if err != nil {
		return err
	}
	// The chart's flags (groups, namespaces, reservation TTL, leader
	// election), then where this process listens and finds its certificate
	// (the bed's CA, not the rotator's), then the caller's: a later flag
	// wins.
	args, err := c.Chart.managerArgs()
	if err != nil {
		return err
	}
	args = append(args, c.externalDataManagerFlags()...)
	args = append(args,
		"--kubeconfig="+c.ManagerKubeconfig,
		"--health-probe-bind-address=127.0.0.1:"+fmt.Sprint(health),
		"--metrics-bind-address=127.0.0.1:"+fmt.Sprint(metrics),
		"--webhook-port="+fmt.Sprint(c.webhooks.LocalServingPort),
		"--cert-dir="+c.CertDir(),
		"--disable-cert-rotation",
	)
	args = append(args, c.opts.ManagerArgs...)
	c.Manager = &Process{
		Name:    "quotakeeper-manager",
		Path:    c.opts.Manager,
		Args:    args,
		Env:     c.opts.ManagerEnv,
		LogPath: filepath.Join(c.opts.Dir, "quotakeeper-manager.log"),
		Ready:   fmt.Sprintf("http://127.0.0.1:%d/readyz", health),
		Metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics),
	}
	// Over HTTPS to an authorized token, as Prometheus scrapes it, unless
	// the flags turn that off.
	if metricsSecure(args) {
		c.Manager.Metrics = fmt.Sprintf("https://127.0.0.1:%d/metrics", metrics)
		c.Manager.MetricsCA = c.CAData()
		if c.Manager.MetricsToken, err = c.metricsReaderToken(ctx); err != nil {
			return err
		}
	}
	if err := c.Manager.Start(ctx, 2*time.Minute); err != nil {
		return err
	}
	return c.webhooks.Install(c.Config)
}

// pluginFlags are the flags of Gatekeeper built with the plugin: where its
// settings are (none for a stock Gatekeeper, which has no such flag).
func pluginFlags(settings string) []string {
	if settings == "" {
		return nil
	}
	return []string{"--quota-settings=" + settings}
}

// GatekeeperServingThreads is Gatekeeper's --max-serving-threads here and
// in config/gatekeeper/values.yaml (maxServingThreads).
const GatekeeperServingThreads = 128

func (c *Cluster) auditSeconds() int64 {
	if c.opts.AuditInterval <= 0 {
		return 5
	}
	return max(1, int64(c.opts.AuditInterval/time.Second))
}

// Restart starts a killed or stopped process again.
func (c *Cluster) Restart(ctx context.Context, p *Process) error {
	if p == nil {
		return errors.New("no such process")
	}
	return p.Start(ctx, 3*time.Minute)
}

// GatekeeperChartDir is Gatekeeper's stock chart in its module directory,
// the chart docs/operations.md installs Gatekeeper with.
func GatekeeperChartDir() (string, error) {
	dir, err := gatekeeperModuleDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "charts", "gatekeeper"), nil
}
