package localcluster

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/quotakeeper/quotakeeper/internal/externaldata"
	quotarego "github.com/quotakeeper/quotakeeper/rego"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// helmOrSkip is bin/helm-<version>; only -short runs (make unit, which
// builds no tools) may go without it.
func helmOrSkip(t *testing.T) string {
	t.Helper()
	helm, err := HelmBinary()
	if err != nil {
		if testing.Short() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	return helm
}

func render(t *testing.T, args ...string) Rendered {
	t.Helper()
	r, err := RenderQuotakeeperChart(helmOrSkip(t), args...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func objectKey(obj *unstructured.Unstructured) string {
	return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// requireSameObjects fails unless got and want hold the same objects
// (kind, namespace, name), each equal in every field.
func requireSameObjects(t *testing.T, what string, got, want []*unstructured.Unstructured) {
	t.Helper()
	index := func(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		m := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			if _, dup := m[objectKey(o)]; dup {
				t.Errorf("%s: %s twice", what, objectKey(o))
			}
			m[objectKey(o)] = o
		}
		return m
	}
	g, w := index(got), index(want)
	keys := func(m map[string]*unstructured.Unstructured) []string {
		var k []string
		for key := range m {
			k = append(k, key)
		}
		sort.Strings(k)
		return k
	}
	if !slices.Equal(keys(g), keys(w)) {
		t.Fatalf("%s: the chart renders\n  %v\nwant\n  %v", what, keys(g), keys(w))
	}
	for key, wo := range w {
		if !reflect.DeepEqual(g[key].Object, wo.Object) {
			t.Errorf("%s: %s differs from its source:\nchart: %v\nwant:  %v", what, key, g[key].Object, wo.Object)
		}
	}
}

func readFiles(t *testing.T, patterns ...string) []*unstructured.Unstructured {
	t.Helper()
	var files []string
	for _, p := range patterns {
		matches, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), p))
		if err != nil || len(matches) == 0 {
			t.Fatalf("%s: no files (%v)", p, err)
		}
		files = append(files, matches...)
	}
	objs, err := ReadObjects(files...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Kustomize(filepath.Join(testenv.RepoRoot(), dir))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// Done when (issue 14): `helm template` of the chart renders what
// `kubectl apply -k config/default` and the shipped templates install:
// the CRDs of config/crd, the RBAC of config/rbac, the webhooks of
// config/webhook, config/gatekeeper's RBAC and SyncSet, and every
// templates/*/template.yaml, each unchanged. A permission, webhook rule or
// template the chart drops or alters fails here.
func TestChartRendersTheShippedObjects(t *testing.T) {
	r := render(t)
	// The CRDs carry helm.sh/resource-policy: keep (crds.keep), so helm
	// uninstall leaves them and every quota object.
	crds := readFiles(t, "config/crd/quota.miloapis.com_*.yaml")
	for _, crd := range crds {
		a := crd.GetAnnotations()
		a["helm.sh/resource-policy"] = "keep"
		crd.SetAnnotations(a)
	}
	requireSameObjects(t, "CRDs", r.Kinds("CustomResourceDefinition"), crds)
	requireSameObjects(t, "ConstraintTemplates", r.Kinds("ConstraintTemplate"), readFiles(t, "templates/*/template.yaml"))
	requireSameObjects(t, "SyncSet", r.Kinds("SyncSet"), readFiles(t, "config/gatekeeper/syncset.yaml"))
	requireSameObjects(t, "RBAC", r.Installed().Kinds(rbacKinds...),
		append(kustomize(t, "config/rbac"), readFiles(t, "config/gatekeeper/rbac.yaml")...))
	var webhooks []*unstructured.Unstructured
	for _, obj := range kustomize(t, "config/webhook") {
		if obj.GetKind() != "Service" {
			webhooks = append(webhooks, obj)
		}
	}
	requireSameObjects(t, "webhook configurations", r.Kinds("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"), webhooks)
	// samples.enabled adds config/samples, less its SyncSet (the chart's own
	// is the same).
	base := map[string]bool{}
	for _, obj := range r {
		base[objectKey(obj)] = true
	}
	var added []*unstructured.Unstructured
	for _, obj := range render(t, "--set", "samples.enabled=true") {
		if !base[objectKey(obj)] {
			added = append(added, obj)
		}
	}
	var samples []string
	for _, f := range must(filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "*.yaml"))) {
		if filepath.Base(f) != "30-syncset.yaml" {
			samples = append(samples, must(filepath.Rel(testenv.RepoRoot(), f)))
		}
	}
	requireSameObjects(t, "samples", added, readFiles(t, samples...))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// The manager's flags, the plugin's settings and the PodDisruptionBudget
// come from values; every namespaced object follows the release namespace,
// and the plugin's objects gatekeeper.namespace.
func TestChartValues(t *testing.T) {
	r := render(t)
	requireManager(t, r, 2, "quotakeeper-manager:v0.1.0",
		"--leader-elect=true",
		"--leader-election-namespace=quotakeeper-system",
		"--system-namespace=quotakeeper-system",
		"--webhook-namespace=quotakeeper-system",
		"--reservation-ttl=2m",
		"--webhook-port=9443",
		"--cert-dir=/certs",
		"--metrics-secure=true",
		"--consumer-label-groups=system:masters",
		"--bypass-groups=system:masters",
	)
	if _, err := r.Object("PodDisruptionBudget", "quotakeeper-manager"); err != nil {
		t.Error(err)
	}
	requireSettings(t, r, "gatekeeper-system", "systemNamespace: quotakeeper-system\nreservationTTL: 2m\ndeadline: 8s\ncapacityLeases: true\n")

	helm := helmOrSkip(t)
	other, err := RenderChart(helm, filepath.Join(testenv.RepoRoot(), "charts", "quotakeeper"), "q", "tenants-quota",
		"--set", "gatekeeper.namespace=policy,manager.replicas=1,manager.leaderElection=false,reservationTTL=90s,plugin.deadline=5s,plugin.capacityLeases=false",
		"--set", "manager.consumerLabelGroups={platform,system:masters},manager.bypassGroups={sre}",
		"--set", "manager.certRotation=false,manager.extraArgs={--claim-concurrency=8}",
		"--set", "manager.extraEnv[0].name=AUTOMEMLIMIT,manager.extraEnv[0].value=0.8",
		"--set", "manager.image.repository=registry.example/qk,manager.image.tag=v9")
	if err != nil {
		t.Fatal(err)
	}
	requireManager(t, other, 1, "registry.example/qk:v9",
		"--leader-elect=false",
		"--leader-election-namespace=tenants-quota",
		"--system-namespace=tenants-quota",
		"--webhook-namespace=tenants-quota",
		"--reservation-ttl=90s",
		"--webhook-port=9443",
		"--cert-dir=/certs",
		"--metrics-secure=true",
		"--disable-cert-rotation",
		"--consumer-label-groups=platform,system:masters",
		"--bypass-groups=sre",
		"--claim-concurrency=8",
	)
	requireManagerEnv(t, r)
	requireManagerEnv(t, other, corev1.EnvVar{Name: "AUTOMEMLIMIT", Value: "0.8"})
	if _, err := other.Object("PodDisruptionBudget", "quotakeeper-manager"); err == nil {
		t.Error("a PodDisruptionBudget for one replica: it would block every drain")
	}
	requireSettings(t, other, "policy", "systemNamespace: tenants-quota\nreservationTTL: 90s\ndeadline: 5s\ncapacityLeases: false\n")
	for _, obj := range other {
		if ns := obj.GetNamespace(); ns != "" && ns != "tenants-quota" && ns != "policy" {
			t.Errorf("%s: namespace %s, want the release's or gatekeeper.namespace", objectKey(obj), ns)
		}
		subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
		for _, s := range subjects {
			s := s.(map[string]any)
			wantNS := map[string]string{"quotakeeper-manager": "tenants-quota", "quotakeeper-uninstall": "tenants-quota", "gatekeeper-admin": "policy"}[s["name"].(string)]
			if s["namespace"] != wantNS {
				t.Errorf("%s: subject %v, want namespace %s", objectKey(obj), s, wantNS)
			}
		}
		hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
		for _, h := range hooks {
			if ns, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "namespace"); ns != "tenants-quota" {
				t.Errorf("%s: webhook calls a Service in %q", objectKey(obj), ns)
			}
		}
	}
	if _, err := RenderQuotakeeperChart(helm, "--set", "manager.leaderElection=false"); err == nil {
		t.Error("two replicas without leader election rendered; want an error")
	}
}

// requireManager fails unless the chart's manager Deployment has that many
// replicas, image and flags.
func requireManager(t *testing.T, r Rendered, replicas int32, image string, args ...string) {
	t.Helper()
	d, err := r.managerDeployment()
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != replicas {
		t.Errorf("manager replicas %v, want %d", d.Spec.Replicas, replicas)
	}
	ctr := d.Spec.Template.Spec.Containers[0]
	if ctr.Image != image {
		t.Errorf("manager image %q, want %q", ctr.Image, image)
	}
	if !slices.Equal(ctr.Args, args) {
		t.Errorf("manager flags %q, want %q", ctr.Args, args)
	}
}

func requireSettings(t *testing.T, r Rendered, namespace, want string) {
	t.Helper()
	cm, err := r.Object("ConfigMap", PluginSettingsConfigMap)
	if err != nil {
		t.Fatal(err)
	}
	if cm.GetNamespace() != namespace {
		t.Errorf("ConfigMap %s in %q, want %q", PluginSettingsConfigMap, cm.GetNamespace(), namespace)
	}
	if got, _, _ := unstructured.NestedString(cm.Object, "data", "settings.yaml"); got != want {
		t.Errorf("settings.yaml %q, want %q", got, want)
	}
}

// requireManagerEnv checks the manager container's environment: only what
// manager.extraEnv adds.
func requireManagerEnv(t *testing.T, r Rendered, want ...corev1.EnvVar) {
	t.Helper()
	d, err := r.managerDeployment()
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Env; !reflect.DeepEqual(got, want) {
		t.Errorf("manager container env %v, want %v", got, want)
	}
}

// admission=externalData renders what a stock Gatekeeper needs and nothing
// it cannot use: the twins (templates/*/template-externaldata.yaml, each
// unchanged) instead of the templates, the Provider the twins call, the
// manager serving the provider a second inside the Provider's timeout, and
// neither the plugin's RBAC nor its settings.
func TestChartRendersTheExternalDataMode(t *testing.T) {
	r := render(t, "--set", "admission=externalData", "--set", "externalData.timeoutSeconds=7")
	requireSameObjects(t, "ConstraintTemplates", r.Kinds("ConstraintTemplate"), readFiles(t, "templates/*/template-externaldata.yaml"))
	// config/rbac's, and no Role in Gatekeeper's namespace: the provider
	// reads Gatekeeper's CA from its webhook configuration's CA bundle.
	requireSameObjects(t, "RBAC", r.Installed().Kinds(rbacKinds...), kustomize(t, "config/rbac"))
	// With externalData.clientCASecret instead, a Role that lets the
	// manager get that one Secret.
	withSecret := render(t, "--set", "admission=externalData", "--set", "externalData.clientCASecret=gatekeeper-system/gatekeeper-webhook-server-cert")
	var rbac []*unstructured.Unstructured
	for _, o := range withSecret.Installed().Kinds(rbacKinds...) {
		if o.GetName() == "quotakeeper-external-data-client-ca" {
			if o.GetNamespace() != GatekeeperNamespace {
				t.Errorf("%s %s in %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), GatekeeperNamespace)
			}
			if o.GetKind() == "Role" {
				rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
				if got, want := fmt.Sprint(rules), "[map[apiGroups:[] resourceNames:[gatekeeper-webhook-server-cert] resources:[secrets] verbs:[get]]]"; got != want {
					t.Errorf("Role %s rules %s, want %s", o.GetName(), got, want)
				}
			}
			continue
		}
		rbac = append(rbac, o)
	}
	requireSameObjects(t, "RBAC", rbac, kustomize(t, "config/rbac"))
	if _, err := r.Object("ConfigMap", PluginSettingsConfigMap); err == nil {
		t.Errorf("the plugin's settings ConfigMap, which a stock Gatekeeper never reads")
	}
	p, err := r.Object("Provider", quotarego.ExternalDataProvider)
	if err != nil {
		t.Fatal(err)
	}
	want := "map[caBundle: timeout:7 url:https://quotakeeper-webhook-service.quotakeeper-system.svc:9444" + externaldata.Path + "]"
	if got := fmt.Sprint(p.Object["spec"]); got != want {
		t.Errorf("Provider spec %s, want %s", got, want)
	}
	requireManager(t, r, 2, "quotakeeper-manager:v0.1.0",
		"--leader-elect=true",
		"--leader-election-namespace=quotakeeper-system",
		"--system-namespace=quotakeeper-system",
		"--webhook-namespace=quotakeeper-system",
		"--reservation-ttl=2m",
		"--webhook-port=9443",
		"--cert-dir=/certs",
		"--metrics-secure=true",
		"--consumer-label-groups=system:masters",
		"--bypass-groups=system:masters",
		"--external-data-bind-address=:9444",
		"--external-data-deadline=6s",
		"--capacity-leases=true",
		"--external-data-client-ca-webhook=gatekeeper-validating-webhook-configuration",
		"--external-data-client-names=gatekeeper-webhook-service.gatekeeper-system.svc",
	)
	d, err := withSecret.managerDeployment()
	if err != nil {
		t.Fatal(err)
	}
	if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--external-data-client-ca-secret=gatekeeper-system/gatekeeper-webhook-server-cert") ||
		slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--external-data-client-ca-webhook") }) {
		t.Errorf("externalData.clientCASecret set: manager flags %q, want the Secret's flag instead of the webhook's", args)
	}
	// Without a client CA, TLS only, and only when asked for by name.
	tlsOnly := render(t, "--set", "admission=externalData", "--set", "externalData.clientCAWebhook=,externalData.clientNames=null,externalData.allowAnyClient=true")
	if d, err = tlsOnly.managerDeployment(); err != nil {
		t.Fatal(err)
	}
	var clientFlags []string
	for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(arg, "--external-data-client") || strings.HasPrefix(arg, "--external-data-allow") {
			clientFlags = append(clientFlags, arg)
		}
	}
	if want := []string{"--external-data-allow-any-client"}; !slices.Equal(clientFlags, want) {
		t.Errorf("no client CA: client flags %q, want %q", clientFlags, want)
	}
	// Capacity leases: in this mode the provider takes them, on unless
	// turned off.
	for value, want := range map[string]string{"": "--capacity-leases=true", "false": "--capacity-leases=false"} {
		args := []string{"--set", "admission=externalData"}
		if value != "" {
			args = append(args, "--set", "plugin.capacityLeases="+value)
		}
		if d, err = render(t, args...).managerDeployment(); err != nil {
			t.Fatal(err)
		}
		if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, want) {
			t.Errorf("plugin.capacityLeases=%q in the externalData mode: manager args %q lack %s", value, args, want)
		}
	}
}
