package localcluster

import (
	"path/filepath"
	"testing"
	"time"

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
