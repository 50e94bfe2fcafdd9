package localcluster

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/quotakeeper/quotakeeper/builtins"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// chartValues is the part of Gatekeeper's chart values these checks read.
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
}

func readValues(t *testing.T, file string) chartValues {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var v chartValues
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", file, err)
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
	chart := readValues(t, filepath.Join(dir, "charts", "gatekeeper", "values.yaml"))
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
}
