package localcluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/cel-go/cel"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

func readValues(t *testing.T, file string) chartValues {
	t.Helper()
	v, err := readChartValues(file)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Done when: config/gatekeeper/values.yaml installs with the stock chart of
// the Gatekeeper release go.mod pins: the pre-install hook pulls the stock
// CRDs image of that release (not one tagged with our image's release,
// which does not exist), the webhook fails closed, and the API server waits
// longer than the plugin's deadline, so a quota check that gives up is
// answered as a denial rather than timed out.
func TestGatekeeperValuesInstallWithTheStockChart(t *testing.T) {
	dir, err := gatekeeperModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	chart := readValues(t, stockChartValues(dir))
	ours := readValues(t, filepath.Join(testenv.RepoRoot(), "config", "gatekeeper", "values.yaml"))

	crds := ours.PreInstall.CRDRepository.Image
	if crds.Repository != chart.Image.CRDRepository || crds.Tag != chart.Image.Release {
		t.Errorf("pre-install CRDs image %s:%s, want the stock %s:%s", crds.Repository, crds.Tag, chart.Image.CRDRepository, chart.Image.Release)
	}
	if ours.FailurePolicy != "Fail" {
		t.Errorf("validatingWebhookFailurePolicy %q, want Fail", ours.FailurePolicy)
	}
	if timeout := time.Duration(ours.WebhookTimeoutSeconds) * time.Second; timeout <= builtins.DefaultDeadline {
		t.Errorf("validatingWebhookTimeoutSeconds %v is not above the plugin's --quota-deadline default %v", timeout, builtins.DefaultDeadline)
	}
	// The plugin's settings reach both Deployments without hand edits: the
	// quotakeeper chart's ConfigMap, mounted where the plugin reads it
	// (plugin.DefaultSettingsFile), optional so Gatekeeper starts first.
	if len(ours.ExtraVolumes) != 1 || len(ours.ExtraVolumeMounts) != 1 {
		t.Fatalf("extraVolumes %+v, extraVolumeMounts %+v: want the plugin settings volume and its mount", ours.ExtraVolumes, ours.ExtraVolumeMounts)
	}
	vol, mount := ours.ExtraVolumes[0], ours.ExtraVolumeMounts[0]
	if vol.ConfigMap == nil || vol.ConfigMap.Name != "quotakeeper-plugin" || !vol.ConfigMap.Optional {
		t.Errorf("extraVolumes[0] %+v: want the optional ConfigMap quotakeeper-plugin", vol)
	}
	if mount.Name != vol.Name || mount.MountPath != "/etc/quotakeeper/plugin" {
		t.Errorf("extraVolumeMounts[0] %+v: want volume %s at /etc/quotakeeper/plugin", mount, vol.Name)
	}
}

// gatekeeperWebhookValues is what the webhook safety tests read of a
// Gatekeeper values file.
type gatekeeperWebhookValues struct {
	Rules           []admissionregistrationv1.RuleWithOperations `json:"validatingWebhookCustomRules"`
	MatchConditions []admissionregistrationv1.MatchCondition     `json:"validatingWebhookMatchConditions"`
	ExemptLabels    map[string][]string                          `json:"validatingWebhookExemptNamespacesLabels"`
	MutatingExempt  map[string][]string                          `json:"mutatingWebhookExemptNamespacesLabels"`
	CheckIgnore     string                                       `json:"validatingWebhookCheckIgnoreFailurePolicy"`
	ControllerMgr   struct {
		ExemptNamespaces []string `json:"exemptNamespaces"`
	} `json:"controllerManager"`
}

func readWebhookValues(t *testing.T, file string) gatekeeperWebhookValues {
	t.Helper()
	var v gatekeeperWebhookValues
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "gatekeeper", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return v
}

// shippedValues are the values files a user installs Gatekeeper with, one
// per admission mode.
var shippedValues = []string{"values.yaml", "values-external-data.yaml"}

// Done when: the values we ship, in both modes, keep what a control plane
// needs out of Gatekeeper's fail-closed webhook (gatekeeper#870, #3829):
// kube-system, kube-node-lease, quotakeeper-system and Gatekeeper's own
// namespace by name (no label to put on first), Leases and Events
// wherever they are, Namespaces without a consumer label, and Gatekeeper's
// check of its ignore label, which otherwise blocks every namespace write
// while Gatekeeper is down. What the stock chart renders of them is checked
// in make verify (TestStockChartRendersOurValues).
func TestGatekeeperValuesAreSafe(t *testing.T) {
	exempt := []string{"kube-system", "kube-node-lease", quotav1alpha1.DefaultSystemNamespace, GatekeeperNamespace}
	for _, file := range shippedValues {
		v := readWebhookValues(t, file)
		for name, got := range map[string][]string{
			"validatingWebhookExemptNamespacesLabels": v.ExemptLabels["kubernetes.io/metadata.name"],
			"mutatingWebhookExemptNamespacesLabels":   v.MutatingExempt["kubernetes.io/metadata.name"],
			"controllerManager.exemptNamespaces":      v.ControllerMgr.ExemptNamespaces,
		} {
			if !slices.Equal(got, exempt) {
				t.Errorf("%s: %s %v, want %v", file, name, got, exempt)
			}
		}
		if v.CheckIgnore != "Ignore" {
			t.Errorf("%s: validatingWebhookCheckIgnoreFailurePolicy %q, want Ignore", file, v.CheckIgnore)
		}
		var names []string
		for _, mc := range v.MatchConditions {
			names = append(names, mc.Name)
		}
		if want := []string{"not-quota-objects", "not-leases", "not-events", "namespaces-with-consumer-labels"}; !slices.Equal(names, want) {
			t.Errorf("%s: matchConditions %v, want %v", file, names, want)
		}
	}
}

// Done when: the rules we ship scope Gatekeeper's webhook to what quota
// counts and miss nothing of it: every kind the shipped RBAC lets the
// manager count, the scale subresource of each counted workload (kubectl
// scale), and Namespaces (their labels name consumers).
func TestQuotaRulesCoverTheCountedKinds(t *testing.T) {
	root := testenv.RepoRoot()
	objs, err := ReadObjects(filepath.Join(root, "config", "rbac", "counted_kinds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/namespaces"}
	for _, obj := range objs {
		if obj.GetKind() != "ClusterRole" || obj.GetLabels()["quota.miloapis.com/aggregate-to-manager"] != "true" {
			continue
		}
		var role rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &role); err != nil {
			t.Fatal(err)
		}
		for _, rule := range role.Rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					want = append(want, g+"/"+res)
					if g == "apps" {
						want = append(want, g+"/"+res+"/scale")
					}
				}
			}
		}
	}
	if len(want) < 6 {
		t.Fatalf("counted kinds %v: config/rbac/counted_kinds.yaml was not read", want)
	}
	for _, file := range shippedValues {
		sent := map[string]bool{}
		for _, r := range readWebhookValues(t, file).Rules {
			if !slices.Equal(r.Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}) {
				t.Errorf("%s: rule %v: operations %v, want CREATE and UPDATE", file, r.Resources, r.Operations)
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					sent[g+"/"+res] = true
				}
			}
		}
		for _, w := range want {
			if !sent[w] {
				t.Errorf("%s does not send %s to Gatekeeper, which quota counts", file, w)
			}
		}
	}
}

// namespaceGuardCondition is the namespace guard's matchCondition as the
// chart installs it (config/webhook's patch, through kustomize).
func namespaceGuardCondition(t *testing.T) string {
	t.Helper()
	configs, err := typed[admissionregistrationv1.ValidatingWebhookConfiguration](render(t), "ValidatingWebhookConfiguration")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range configs {
		for _, w := range c.Webhooks {
			if w.Name == "vnamespace-consumer-labels.quota.miloapis.com" {
				if len(w.MatchConditions) != 1 {
					t.Fatalf("the namespace guard has matchConditions %+v, want one", w.MatchConditions)
				}
				return w.MatchConditions[0].Expression
			}
		}
	}
	t.Fatal("the chart renders no namespace guard webhook")
	return ""
}

// evalCondition evaluates a matchCondition expression the way the API
// server binds it: request, object and oldObject (null on CREATE).
func evalCondition(t *testing.T, expr, op string, resource map[string]any, old, labels map[string]string) bool {
	t.Helper()
	env, err := cel.NewEnv(cel.Variable("request", cel.DynType), cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("compile %s: %v", expr, iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	obj := func(l map[string]string) any {
		md := map[string]any{"name": "n"}
		if l != nil {
			md["labels"] = l
		}
		return map[string]any{"metadata": md}
	}
	var oldObj any
	if op != "CREATE" {
		oldObj = obj(old)
	}
	out, _, err := prg.Eval(map[string]any{
		"request":   map[string]any{"operation": op, "resource": resource},
		"object":    obj(labels),
		"oldObject": oldObj,
	})
	if err != nil {
		t.Fatalf("eval %s %v -> %v: %v", op, old, labels, err)
	}
	return out.Value().(bool)
}

// Done when: the namespace guard and Gatekeeper's webhook see a namespace
// write exactly when a label outside Kubernetes' reserved domains is set,
// changed or removed, which covers every consumer label
// (v1alpha1.KubernetesReservedLabel keeps consumer labels out of those
// domains): a namespace is created while quotakeeper and Gatekeeper are
// down unless it names a consumer, and Gatekeeper's condition is the
// guard's for namespaces and true for every other kind.
func TestNamespaceConditionSendsOnlyConsumerLabelWrites(t *testing.T) {
	guard := namespaceGuardCondition(t)
	namespaces := map[string]any{"group": "", "version": "v1", "resource": "namespaces"}
	cases := []struct {
		name       string
		op         string
		old, new   map[string]string
		wantCalled bool
	}{
		{"create without labels", "CREATE", nil, nil, false},
		{"create with the API server's name label", "CREATE", nil, map[string]string{"kubernetes.io/metadata.name": "n"}, false},
		{"create with pod security and app labels", "CREATE", nil, map[string]string{"kubernetes.io/metadata.name": "n", "pod-security.kubernetes.io/enforce": "restricted", "app.kubernetes.io/name": "x", "k8s.io/x": "y"}, false},
		{"create with a consumer label", "CREATE", nil, map[string]string{"kubernetes.io/metadata.name": "n", "resourcemanager.miloapis.com/organization": "acme"}, true},
		{"create with an unprefixed label", "CREATE", nil, map[string]string{"team": "a"}, true},
		{"create with a look-alike domain", "CREATE", nil, map[string]string{"notkubernetes.io/x": "y"}, true},
		{"update of a reserved label", "UPDATE", map[string]string{"a.example/org": "acme"}, map[string]string{"a.example/org": "acme", "pod-security.kubernetes.io/enforce": "baseline"}, false},
		{"update without label changes", "UPDATE", map[string]string{"a.example/org": "acme"}, map[string]string{"a.example/org": "acme"}, false},
		{"update changing a consumer label", "UPDATE", map[string]string{"a.example/org": "acme"}, map[string]string{"a.example/org": "globex"}, true},
		{"update adding a consumer label", "UPDATE", nil, map[string]string{"a.example/org": "acme"}, true},
		{"update removing a consumer label", "UPDATE", map[string]string{"a.example/org": "acme"}, map[string]string{"kubernetes.io/metadata.name": "n"}, true},
		{"update removing every label", "UPDATE", map[string]string{"a.example/org": "acme"}, nil, true},
	}
	for _, tc := range cases {
		// The Go twin the registrations and flags are held to.
		reference := false
		for _, pair := range [][2]map[string]string{{tc.old, tc.new}, {tc.new, tc.old}} {
			for k, v := range pair[1] {
				if was, ok := pair[0][k]; (!ok || was != v) && !quotav1alpha1.KubernetesReservedLabel(k) {
					reference = true
				}
			}
		}
		if reference != tc.wantCalled {
			t.Errorf("%s: KubernetesReservedLabel says called=%v, want %v", tc.name, reference, tc.wantCalled)
		}
		if got := evalCondition(t, guard, tc.op, namespaces, tc.old, tc.new); got != tc.wantCalled {
			t.Errorf("namespace guard, %s: called=%v, want %v", tc.name, got, tc.wantCalled)
		}
		for _, file := range shippedValues {
			for _, mc := range readWebhookValues(t, file).MatchConditions {
				if mc.Name != "namespaces-with-consumer-labels" {
					continue
				}
				if got := evalCondition(t, mc.Expression, tc.op, namespaces, tc.old, tc.new); got != tc.wantCalled {
					t.Errorf("%s, %s: Gatekeeper called=%v, want %v", file, tc.name, got, tc.wantCalled)
				}
				configmaps := map[string]any{"group": "", "version": "v1", "resource": "configmaps"}
				if !evalCondition(t, mc.Expression, tc.op, configmaps, tc.old, tc.new) {
					t.Errorf("%s, %s: a ConfigMap does not reach Gatekeeper", file, tc.name)
				}
				if strings.Count(mc.Expression, `!k.matches("^([a-z0-9.-]*[.])?(kubernetes|k8s)[.]io/")`) != 3 {
					t.Errorf("%s: %s does not classify labels as the guard does", file, mc.Name)
				}
			}
		}
	}
}

// Done when: the bed renders Gatekeeper's chart for the Kubernetes release
// it runs even though bin/testbin's kube-apiserver, a source build, says
// v0.0.0-master: for that, the stock chart renders no matchConditions.
func TestKubeVersionOfASourceBuild(t *testing.T) {
	for _, tc := range []struct{ server, assets, want string }{
		{"v1.36.3", "/x/bin/testbin/k8s-v1.35.0-etcd-v3.6.16", "v1.36.3"},
		{"v0.0.0-master+$Format:%H$", "/x/bin/testbin/k8s-v1.36.3-etcd-v3.6.16", "v1.36.3"},
	} {
		got, err := kubeVersion(tc.server, tc.assets)
		if err != nil || got != tc.want {
			t.Errorf("kubeVersion(%q, %q) = %q, %v; want %q", tc.server, tc.assets, got, err, tc.want)
		}
	}
	if _, err := kubeVersion("v0.0.0-master", "/tmp/assets"); err == nil {
		t.Error("kubeVersion of an unversioned server and directory: no error")
	}
}
