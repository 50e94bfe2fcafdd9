package localcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// Issue 25: CRDs are templates, so helm upgrade applies a changed schema
// (crds/ is installed once and never upgraded); helm uninstall keeps them
// unless crds.keep is false; crds.install: false leaves them to the user.
func TestChartCRDsAreUpgradedTemplates(t *testing.T) {
	if _, err := os.Stat(filepath.Join(testenv.RepoRoot(), "charts", "quotakeeper", "crds")); !os.IsNotExist(err) {
		t.Errorf("charts/quotakeeper/crds exists (%v): Helm would install it once and never upgrade it", err)
	}
	for _, crd := range render(t).Kinds("CustomResourceDefinition") {
		if _, hook := crd.GetAnnotations()["helm.sh/hook"]; hook {
			t.Errorf("CRD %s is a hook: Helm would not track it", crd.GetName())
		}
	}
	for _, crd := range render(t, "--set", "crds.keep=false").Kinds("CustomResourceDefinition") {
		if policy, ok := crd.GetAnnotations()["helm.sh/resource-policy"]; ok {
			t.Errorf("crds.keep=false: CRD %s has resource-policy %q", crd.GetName(), policy)
		}
	}
	if n := len(render(t).Kinds("CustomResourceDefinition")); n != 8 {
		t.Errorf("the chart renders %d CRDs, want 8", n)
	}
	if crds := render(t, "--set", "crds.install=false").Kinds("CustomResourceDefinition"); len(crds) != 0 {
		t.Errorf("crds.install=false renders %d CRDs", len(crds))
	}
}

// The manager's certificate rotator updates its Secret but never creates
// it, so the chart renders it, empty, in the release namespace, as
// config/manager does for kustomize; with manager.certRotation false
// cert-manager creates it, and the chart renders none.
func TestChartRendersTheSecretTheRotatorFills(t *testing.T) {
	secret, err := render(t, "--namespace", "quota-ops").Object("Secret", "quotakeeper-webhook-server-cert")
	if err != nil {
		t.Fatal(err)
	}
	if secret.GetNamespace() != "quota-ops" {
		t.Errorf("the Secret is in namespace %q, want the release's, quota-ops", secret.GetNamespace())
	}
	if _, found := secret.Object["data"]; found {
		t.Errorf("the chart's Secret has data: helm upgrade would overwrite the rotator's certificate")
	}
	kustomized := slices.ContainsFunc(kustomize(t, "config/default"), func(obj *unstructured.Unstructured) bool {
		return obj.GetKind() == "Secret" && obj.GetName() == secret.GetName()
	})
	if !kustomized {
		t.Errorf("config/default has no Secret %s", secret.GetName())
	}
	if secrets := render(t, "--set", "manager.certRotation=false").Kinds("Secret"); len(secrets) != 0 {
		t.Errorf("manager.certRotation=false renders %d Secrets, want none (cert-manager creates it)", len(secrets))
	}
}

// The manager runs as 65532 and its certificate files are root's: the
// Secret volume's mode must let others read them. (The chart once said
// defaultMode: 0420, which YAML reads as octal: owner read, group write,
// nothing for others, and the manager failed on a real node.)
func TestChartManagerReadsItsCertificate(t *testing.T) {
	deployments, err := typed[appsv1.Deployment](render(t), "Deployment")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deployments {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret == nil || v.Secret.SecretName != "quotakeeper-webhook-server-cert" {
				continue
			}
			mode := int32(0o644) // the API's default
			if v.Secret.DefaultMode != nil {
				mode = *v.Secret.DefaultMode
			}
			if mode&0o004 == 0 {
				t.Errorf("Deployment %s volume %s: defaultMode %#o: user 65532 cannot read the certificate", d.Name, v.Name, mode)
			}
			return
		}
	}
	t.Fatal("no Deployment mounts Secret quotakeeper-webhook-server-cert")
}

// The pre-delete hook: a Job running `/manager uninstall` in the manager's
// image, after its ServiceAccount and RBAC (lower weights), all deleted
// once it succeeds; the RBAC grants exactly what package uninstall does
// (uninstall's own test runs it under these rules).
func TestChartUninstallHook(t *testing.T) {
	r := render(t, "--set", "systemNamespace=tenants-quota,manager.image.repository=registry.example/qk,manager.image.tag=v9")
	hooks := Rendered{}
	for _, obj := range r {
		if obj.GetAnnotations()["helm.sh/hook"] != "" {
			hooks = append(hooks, obj)
		}
	}
	var got []string
	for _, h := range hooks {
		a := h.GetAnnotations()
		got = append(got, strings.Join([]string{h.GetKind(), h.GetNamespace(), h.GetName(), a["helm.sh/hook"], a["helm.sh/hook-weight"], a["helm.sh/hook-delete-policy"]}, " "))
	}
	const policy = "before-hook-creation,hook-succeeded"
	want := []string{
		"ServiceAccount quotakeeper-system quotakeeper-uninstall pre-delete -10 " + policy,
		"ClusterRole  quotakeeper-uninstall pre-delete -10 " + policy,
		"ClusterRoleBinding  quotakeeper-uninstall pre-delete -9 " + policy,
		"Role quotakeeper-system quotakeeper-uninstall pre-delete -10 " + policy,
		"Role tenants-quota quotakeeper-uninstall pre-delete -10 " + policy,
		"RoleBinding quotakeeper-system quotakeeper-uninstall pre-delete -9 " + policy,
		"RoleBinding tenants-quota quotakeeper-uninstall pre-delete -9 " + policy,
		"Job quotakeeper-system quotakeeper-uninstall pre-delete 0 " + policy,
	}
	if !slices.Equal(got, want) {
		t.Errorf("hooks:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	jobs, err := typed[batchv1.Job](r, "Job")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Jobs %v (%v), want one", jobs, err)
	}
	pod := jobs[0].Spec.Template.Spec
	c := pod.Containers[0]
	wantArgs := []string{"uninstall", "--namespace=quotakeeper-system", "--system-namespace=tenants-quota"}
	if c.Image != "registry.example/qk:v9" || !slices.Equal(c.Args, wantArgs) || len(c.Command) != 0 {
		t.Errorf("uninstall container: image %q command %q args %q, want registry.example/qk:v9, the image's entrypoint, %q", c.Image, c.Command, c.Args, wantArgs)
	}
	if pod.ServiceAccountName != "quotakeeper-uninstall" || pod.RestartPolicy != corev1.RestartPolicyOnFailure {
		t.Errorf("uninstall pod: serviceAccount %q restartPolicy %q", pod.ServiceAccountName, pod.RestartPolicy)
	}
	if len(render(t, "--set", "uninstallHook.enabled=false").Kinds("Job")) != 0 {
		t.Error("uninstallHook.enabled=false still renders the Job")
	}
}

// What a platform team sets on a chart: priority, pull secrets, pod labels
// and annotations, spreading; the same on the hook's pod where it applies.
func TestChartPodValues(t *testing.T) {
	d, err := render(t).managerDeployment()
	if err != nil {
		t.Fatal(err)
	}
	spec := d.Spec.Template.Spec
	wantSpread := []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "quotakeeper-manager"}},
	}}
	if !reflect.DeepEqual(spec.TopologySpreadConstraints, wantSpread) {
		t.Errorf("default topologySpreadConstraints %+v, want %+v", spec.TopologySpreadConstraints, wantSpread)
	}
	// Every quotakeeper webhook fails closed: the manager is critical by
	// default, as Gatekeeper's chart makes its own pods.
	if spec.PriorityClassName != "system-cluster-critical" || spec.ImagePullSecrets != nil || len(d.Spec.Template.Annotations) != 0 {
		t.Errorf("defaults: priorityClassName %q, imagePullSecrets %v, annotations %v; want system-cluster-critical and none", spec.PriorityClassName, spec.ImagePullSecrets, d.Spec.Template.Annotations)
	}
	if d, err := render(t, "--set", "manager.priorityClassName=").managerDeployment(); err != nil {
		t.Error(err)
	} else if got := d.Spec.Template.Spec.PriorityClassName; got != "" {
		t.Errorf("priorityClassName= renders %q, want none", got)
	}

	r := render(t,
		"--set", "manager.priorityClassName=platform-critical,imagePullSecrets[0].name=regcred",
		"--set", "manager.podLabels.team=platform,manager.podAnnotations.example\\.com/owner=sre",
		"--set", "manager.topologySpreadConstraints[0].maxSkew=1,manager.topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone,manager.topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule")
	d, err = r.managerDeployment()
	if err != nil {
		t.Fatal(err)
	}
	spec = d.Spec.Template.Spec
	if spec.PriorityClassName != "platform-critical" || !reflect.DeepEqual(spec.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "regcred"}}) {
		t.Errorf("priorityClassName %q, imagePullSecrets %v", spec.PriorityClassName, spec.ImagePullSecrets)
	}
	wantLabels := map[string]string{"team": "platform", "app.kubernetes.io/name": "quotakeeper-manager"}
	if !reflect.DeepEqual(d.Spec.Template.Labels, wantLabels) || d.Spec.Template.Annotations["example.com/owner"] != "sre" {
		t.Errorf("pod labels %v, annotations %v", d.Spec.Template.Labels, d.Spec.Template.Annotations)
	}
	if z := spec.TopologySpreadConstraints; len(z) != 1 || z[0].TopologyKey != "topology.kubernetes.io/zone" || z[0].WhenUnsatisfiable != corev1.DoNotSchedule || z[0].LabelSelector == nil {
		t.Errorf("topologySpreadConstraints %+v, want the zone, DoNotSchedule, the manager's selector", z)
	}
	jobs, err := typed[batchv1.Job](r, "Job")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Jobs %v (%v)", jobs, err)
	}
	if js := jobs[0].Spec.Template.Spec; js.PriorityClassName != "platform-critical" || !reflect.DeepEqual(js.ImagePullSecrets, spec.ImagePullSecrets) {
		t.Errorf("uninstall pod: priorityClassName %q, imagePullSecrets %v; want the manager's", js.PriorityClassName, js.ImagePullSecrets)
	}
	if d, err := render(t, "--set", "manager.topologySpreadConstraints=null").managerDeployment(); err != nil || d.Spec.Template.Spec.TopologySpreadConstraints != nil {
		t.Errorf("topologySpreadConstraints=null: %v (%v), want none", d.Spec.Template.Spec.TopologySpreadConstraints, err)
	}
}

// The metrics Service selects the manager's pods on their metrics port;
// the ServiceMonitor, PrometheusRule and Grafana dashboard are off by
// default and, turned on, carry config/prometheus's rules and dashboard
// unchanged.
func TestChartMonitoringObjects(t *testing.T) {
	r := render(t)
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		if objs := r.Kinds(kind); len(objs) != 0 {
			t.Errorf("default values render a %s", kind)
		}
	}
	if _, err := r.Object("ConfigMap", "quotakeeper-grafana-dashboard"); err == nil {
		t.Error("default values render the Grafana dashboard")
	}
	svcs, err := typed[corev1.Service](r, "Service")
	if err != nil {
		t.Fatal(err)
	}
	var metrics *corev1.Service
	for _, s := range svcs {
		if s.Name == "quotakeeper-manager-metrics" {
			metrics = s
		}
	}
	d, err := r.managerDeployment()
	if err != nil {
		t.Fatal(err)
	}
	if metrics == nil || !reflect.DeepEqual(metrics.Spec.Selector, d.Spec.Selector.MatchLabels) ||
		len(metrics.Spec.Ports) != 1 || metrics.Spec.Ports[0].TargetPort.StrVal != "metrics" || metrics.Spec.Ports[0].Port != 8080 {
		t.Fatalf("metrics Service %+v, want one selecting the manager's pods, port 8080 to metrics", metrics)
	}
	if !slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" && p.ContainerPort == 8080 }) {
		t.Error("the manager container has no port metrics 8080 (--metrics-bind-address :8080)")
	}

	on := render(t, "--set", "metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.labels.release=prom",
		"--set", "metrics.prometheusRule.enabled=true,metrics.prometheusRule.labels.release=prom",
		"--set", "metrics.grafanaDashboard.enabled=true,metrics.grafanaDashboard.namespace=grafana")
	sm, err := on.Object("ServiceMonitor", "quotakeeper-manager")
	if err != nil {
		t.Fatal(err)
	}
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range selector {
		if metrics.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s; the metrics Service has %q", k, v, metrics.Labels[k])
		}
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != "metrics" || endpoints[0].(map[string]any)["honorLabels"] != true {
		t.Errorf("ServiceMonitor endpoints %v, want port metrics with honorLabels (docs/metrics.md)", endpoints)
	}
	if sm.GetLabels()["release"] != "prom" {
		t.Errorf("ServiceMonitor labels %v, want release=prom added", sm.GetLabels())
	}
	// HTTPS with Prometheus's token, checking the webhook certificate's
	// name (metrics.secure, on by default); plain HTTP with it off.
	want := "map[bearerTokenFile:/var/run/secrets/kubernetes.io/serviceaccount/token honorLabels:true interval:30s path:/metrics port:metrics scheme:https " +
		"tlsConfig:map[insecureSkipVerify:true serverName:quotakeeper-webhook-service." + ChartNamespace + ".svc]]"
	if got := fmt.Sprint(endpoints[0]); got != want {
		t.Errorf("ServiceMonitor endpoint %s, want %s", got, want)
	}
	plain := render(t, "--set", "metrics.serviceMonitor.enabled=true,metrics.secure=false")
	if sm, err = plain.Object("ServiceMonitor", "quotakeeper-manager"); err != nil {
		t.Fatal(err)
	}
	endpoints, _, _ = unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if got, want := fmt.Sprint(endpoints[0]), "map[honorLabels:true interval:30s path:/metrics port:metrics]"; got != want {
		t.Errorf("metrics.secure=false: ServiceMonitor endpoint %s, want %s", got, want)
	}
	// metrics.readers are bound to quotakeeper-metrics-reader; none by default.
	if _, err := r.Object("ClusterRoleBinding", "quotakeeper-metrics-reader"); err == nil {
		t.Error("default values bind quotakeeper-metrics-reader")
	}
	readers := render(t, "--set", "metrics.readers[0].kind=ServiceAccount,metrics.readers[0].name=prometheus-k8s,metrics.readers[0].namespace=monitoring")
	crb, err := readers.Object("ClusterRoleBinding", "quotakeeper-metrics-reader")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(crb.Object["roleRef"], crb.Object["subjects"]), "map[apiGroup:rbac.authorization.k8s.io kind:ClusterRole name:quotakeeper-metrics-reader] [map[kind:ServiceAccount name:prometheus-k8s namespace:monitoring]]"; got != want {
		t.Errorf("ClusterRoleBinding quotakeeper-metrics-reader: %s, want %s", got, want)
	}

	rule, err := on.Object("PrometheusRule", "quotakeeper")
	if err != nil {
		t.Fatal(err)
	}
	shipped := readFiles(t, "config/prometheus/prometheusrule.yaml")[0]
	if !reflect.DeepEqual(rule.Object["spec"], shipped.Object["spec"]) {
		t.Error("the chart's PrometheusRule spec differs from config/prometheus/prometheusrule.yaml's")
	}
	if rule.GetNamespace() != ChartNamespace || rule.GetLabels()["release"] != "prom" || rule.GetLabels()["app.kubernetes.io/name"] != "quotakeeper" {
		t.Errorf("PrometheusRule in %q with labels %v", rule.GetNamespace(), rule.GetLabels())
	}

	dash, err := on.Object("ConfigMap", "quotakeeper-grafana-dashboard")
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "prometheus", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedString(dash.Object, "data", "quotakeeper.json")
	if got != strings.TrimRight(string(file), "\n") || !json.Valid([]byte(got)) {
		t.Error("the dashboard ConfigMap does not hold config/prometheus/grafana-dashboard.json")
	}
	if dash.GetNamespace() != "grafana" || dash.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap in %q labelled %v", dash.GetNamespace(), dash.GetLabels())
	}
}

// values.schema.json refuses what would otherwise be ignored or fail late:
// a misspelt key, a duration the manager cannot parse, an unknown pull
// policy.
func TestChartValuesSchema(t *testing.T) {
	helm := helmOrSkip(t)
	dir := filepath.Join(testenv.RepoRoot(), "charts", "quotakeeper")
	for set, want := range map[string]string{
		"manager.replicass=3":                  "additional properties 'replicass' not allowed",
		"reservationTTL=soon":                  "'soon' does not match pattern",
		"manager.image.pullPolicy=Sometimes":   "value must be one of",
		"metrics.serviceMonitor.enabledd=true": "additional properties 'enabledd' not allowed",
	} {
		_, err := RenderChart(helm, dir, "quotakeeper", ChartNamespace, "--set", set)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--set %s: %v, want an error containing %q", set, err, want)
		}
	}
	// The schema is valid JSON and the defaults meet it (render(t) above
	// renders them).
	data, err := os.ReadFile(filepath.Join(dir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := yaml.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
}

// networkPolicy.enabled lets in only what the manager serves, on its pods:
// the webhooks, the provider from Gatekeeper's pods only (and only in the
// External Data mode), the metrics, the probes. Off by default. (No network
// plugin here enforces NetworkPolicy, so this is its rendering.)
func TestChartNetworkPolicy(t *testing.T) {
	if objs := render(t).Kinds("NetworkPolicy"); len(objs) != 0 {
		t.Error("default values render a NetworkPolicy")
	}
	ingress := func(args ...string) string {
		t.Helper()
		np, err := render(t, append([]string{"--set", "networkPolicy.enabled=true"}, args...)...).Object("NetworkPolicy", "quotakeeper-manager")
		if err != nil {
			t.Fatal(err)
		}
		selector, _, _ := unstructured.NestedStringMap(np.Object, "spec", "podSelector", "matchLabels")
		if fmt.Sprint(selector) != "map[app.kubernetes.io/name:quotakeeper-manager]" {
			t.Errorf("NetworkPolicy selects %v, want the manager's pods", selector)
		}
		rules, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
		return fmt.Sprint(rules)
	}
	port := func(p int) string { return fmt.Sprintf("ports:[map[port:%d protocol:TCP]]", p) }
	if got, want := ingress(), "[map["+port(9443)+"] map["+port(8080)+"] map["+port(8081)+"]]"; got != want {
		t.Errorf("builtins mode: ingress %s, want %s", got, want)
	}
	got := ingress("--set", "admission=externalData,gatekeeper.namespace=policy",
		"--set", "networkPolicy.webhookFrom[0].ipBlock.cidr=10.0.0.0/24",
		"--set", "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring")
	want := "[map[from:[map[ipBlock:map[cidr:10.0.0.0/24]]] " + port(9443) + "] " +
		"map[from:[map[namespaceSelector:map[matchLabels:map[kubernetes.io/metadata.name:policy]] podSelector:map[matchLabels:map[gatekeeper.sh/system:yes]]]] " + port(9444) + "] " +
		"map[from:[map[namespaceSelector:map[matchLabels:map[team:monitoring]]]] " + port(8080) + "] " +
		"map[" + port(8081) + "]]"
	if got != want {
		t.Errorf("externalData mode with peers: ingress\n%s\nwant\n%s", got, want)
	}
}

// certManager.enabled hands the webhook certificate to cert-manager: a
// Certificate into the Secret the manager reads with its rotation off, a
// self-signed CA of the release's own unless an issuer is given, and the CA
// injector's annotation on both webhook configurations. The Provider's CA
// bundle, which the injector does not write, must then be given.
func TestChartCertManager(t *testing.T) {
	r := render(t, "--set", "certManager.enabled=true")
	d, err := r.managerDeployment()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--disable-cert-rotation") {
		t.Errorf("manager flags %q, want --disable-cert-rotation", d.Spec.Template.Spec.Containers[0].Args)
	}
	if _, err := r.Object("Secret", "quotakeeper-webhook-server-cert"); err == nil {
		t.Error("the chart renders the certificate's Secret, which cert-manager writes")
	}
	serving, err := r.Object("Certificate", "quotakeeper-serving-cert")
	if err != nil {
		t.Fatal(err)
	}
	want := "map[dnsNames:[quotakeeper-webhook-service." + ChartNamespace + ".svc quotakeeper-webhook-service." + ChartNamespace + ".svc.cluster.local] " +
		"duration:2160h issuerRef:map[kind:Issuer name:quotakeeper-ca] privateKey:map[algorithm:ECDSA rotationPolicy:Always size:256] " +
		"renewBefore:360h secretName:quotakeeper-webhook-server-cert usages:[server auth digital signature]]"
	if got := fmt.Sprint(serving.Object["spec"]); got != want {
		t.Errorf("Certificate quotakeeper-serving-cert spec\n%s\nwant\n%s", got, want)
	}
	for _, o := range []struct{ kind, name string }{{"Issuer", "quotakeeper-selfsigned"}, {"Certificate", "quotakeeper-ca"}, {"Issuer", "quotakeeper-ca"}} {
		if _, err := r.Object(o.kind, o.name); err != nil {
			t.Errorf("no issuer given: %v", err)
		}
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, w := range r.Kinds(kind) {
			if got := w.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != ChartNamespace+"/quotakeeper-serving-cert" {
				t.Errorf("%s %s: inject-ca-from %q", kind, w.GetName(), got)
			}
		}
	}

	own := render(t, "--set", "certManager.enabled=true,certManager.issuerRef.name=corp-ca,certManager.issuerRef.kind=ClusterIssuer")
	if _, err := own.Object("Issuer", "quotakeeper-ca"); err == nil {
		t.Error("an issuer given: the chart still renders its own CA")
	}
	if serving, err = own.Object("Certificate", "quotakeeper-serving-cert"); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(serving.Object["spec"].(map[string]any)["issuerRef"]); got != "map[kind:ClusterIssuer name:corp-ca]" {
		t.Errorf("an issuer given: issuerRef %s", got)
	}

	_, err = RenderQuotakeeperChart(helmOrSkip(t), "--set", "certManager.enabled=true,admission=externalData")
	if err == nil || !strings.Contains(err.Error(), "certManager.enabled with admission=externalData needs externalData.caBundle") {
		t.Errorf("cert-manager in the External Data mode without the Provider's CA: %v, want the chart to refuse", err)
	}
}
