package localcluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/modfile"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/quotakeeper/quotakeeper/internal/checkout"
	"github.com/quotakeeper/quotakeeper/internal/externaldata"
	"github.com/quotakeeper/quotakeeper/internal/freeport"
	quotarego "github.com/quotakeeper/quotakeeper/rego"
)

// The second admission mode (Options.ExternalData): Gatekeeper's own build,
// the chart's Provider pointed at the manager's provider on this machine,
// the manager serving it with the bed's certificate.

// gatekeeperModule is Gatekeeper's module, whose version go.mod pins.
const gatekeeperModule = "github.com/open-policy-agent/gatekeeper/v3"

// StockGatekeeperBinary is bin/gatekeeper-stock-<version>: Gatekeeper as its
// release builds it, from its own module at the version go.mod pins
// (`make gatekeeper-stock`).
func StockGatekeeperBinary() (string, error) {
	root, err := checkout.Root()
	if err != nil {
		return "", err
	}
	gomod := filepath.Join(root, "go.mod")
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	f, err := modfile.ParseLax(gomod, data, nil)
	if err != nil {
		return "", err
	}
	for _, r := range f.Require {
		if r.Mod.Path == gatekeeperModule {
			bin := filepath.Join(root, "bin", "gatekeeper-stock-"+r.Mod.Version)
			if _, err := os.Stat(bin); err != nil {
				return "", fmt.Errorf("bin/gatekeeper-stock-%s missing: run 'make gatekeeper-stock' (make test builds it)", r.Mod.Version)
			}
			return bin, nil
		}
	}
	return "", fmt.Errorf("%s requires no %s", gomod, gatekeeperModule)
}

// installProvider installs the chart's Provider with its URL the manager's
// provider on this machine and its CA bundle the bed's CA, as the manager's
// rotator would write it.
func (c *Cluster) installProvider(ctx context.Context) error {
	port, err := freeport.Get()
	if err != nil {
		return err
	}
	c.externalDataPort = port
	p, err := c.Chart.Object("Provider", quotarego.ExternalDataProvider)
	if err != nil {
		return err
	}
	p = p.DeepCopy()
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, externaldata.Path)
	if err := unstructured.SetNestedField(p.Object, url, "spec", "url"); err != nil {
		return err
	}
	if err := unstructured.SetNestedField(p.Object, base64.StdEncoding.EncodeToString(c.CAData()), "spec", "caBundle"); err != nil {
		return err
	}
	return c.Apply(ctx, time.Minute, p)
}

// externalDataManagerFlags are the manager's flags for the provider here:
// where it listens.
func (c *Cluster) externalDataManagerFlags() []string {
	if !c.opts.ExternalData {
		return nil
	}
	return []string{fmt.Sprintf("--external-data-bind-address=127.0.0.1:%d", c.externalDataPort)}
}

// ExternalDataAddr is where the manager's provider listens; "" in the
// builtin mode.
func (c *Cluster) ExternalDataAddr() string {
	if !c.opts.ExternalData {
		return ""
	}
	return fmt.Sprintf("127.0.0.1:%d", c.externalDataPort)
}

// gatekeeperImage is what the bed's Gatekeeper Pods say they run.
func (c *Cluster) gatekeeperImage() string {
	if c.opts.ExternalData {
		return "openpolicyagent/gatekeeper"
	}
	return "local/gatekeeper-quotakeeper"
}
