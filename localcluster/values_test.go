package localcluster

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/quotakeeper/quotakeeper/builtins"
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

// Done when: config/gatekeeper/values-quota-only.yaml scopes Gatekeeper's
// webhook to what quota counts and misses nothing of it: every kind the
// shipped RBAC lets the manager count, the scale subresource of each counted
// workload (kubectl scale), and Namespaces (their labels name consumers).
func TestQuotaOnlyRulesCoverTheCountedKinds(t *testing.T) {
	root := testenv.RepoRoot()
	var quotaOnly struct {
		Rules []admissionregistrationv1.RuleWithOperations `json:"validatingWebhookCustomRules"`
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "gatekeeper", "values-quota-only.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &quotaOnly); err != nil {
		t.Fatal(err)
	}
	sent := map[string]bool{}
	for _, r := range quotaOnly.Rules {
		if !slices.Equal(r.Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}) {
			t.Errorf("rule %v: operations %v, want CREATE and UPDATE", r.Resources, r.Operations)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				sent[g+"/"+res] = true
			}
		}
	}
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
	for _, w := range want {
		if !sent[w] {
			t.Errorf("values-quota-only.yaml does not send %s to Gatekeeper, which quota counts", w)
		}
	}
}
