package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/checkout"
)

// The bed installs quotakeeper from what `helm template` renders of
// charts/quotakeeper, the chart users install: its CRDs, RBAC, webhook
// configurations, the plugin's RBAC and settings, the SyncSet and the
// ConstraintTemplates. So a permission, rule or setting the chart drops
// fails here. Only what needs a kubelet (the Deployment) is replaced by
// local processes, and the webhooks' clientConfig by the loopback URLs they
// serve on.

// ChartNamespace is the namespace the bed installs the chart into, the one
// docs/operations.md installs it into.
const ChartNamespace = quotav1alpha1.DefaultSystemNamespace

// helmModule is the module hack/tools/helm pins; the Makefile builds its CLI
// into bin/helm-<version>.
const helmModule = "helm.sh/helm/v3"

// HelmBinary is bin/helm-<version>, the version hack/tools/helm/go.mod pins
// (`make e2e`, `make run` and `make test` build it).
func HelmBinary() (string, error) {
	root, err := checkout.Root()
	if err != nil {
		return "", err
	}
	gomod := filepath.Join(root, "hack", "tools", "helm", "go.mod")
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	f, err := modfile.ParseLax(gomod, data, nil)
	if err != nil {
		return "", err
	}
	for _, r := range f.Require {
		if r.Mod.Path == helmModule {
			bin := filepath.Join(root, "bin", "helm-"+r.Mod.Version)
			if _, err := os.Stat(bin); err != nil {
				return "", fmt.Errorf("bin/helm-%s missing: run 'make %s' (make e2e, run and test build it)", r.Mod.Version, "bin/helm-"+r.Mod.Version)
			}
			return bin, nil
		}
	}
	return "", fmt.Errorf("%s requires no %s", gomod, helmModule)
}

// Rendered are the objects a chart renders, in helm template's order.
type Rendered []*unstructured.Unstructured

// RenderChart runs `helm template release dir -n namespace --include-crds`
// with args (--set, -f) and decodes what it prints.
func RenderChart(helm, dir, release, namespace string, args ...string) (Rendered, error) {
	return renderedBy(helm, append([]string{"template", release, dir, "--namespace", namespace, "--include-crds"}, args...)...)
}

// renderedBy runs a command that prints YAML (helm template, kubectl
// kustomize) and decodes the objects it prints.
func renderedBy(name string, args ...string) ([]*unstructured.Unstructured, error) {
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, stderr.String())
	}
	return DecodeObjects(strings.Join(cmd.Args, " "), out)
}

// RenderQuotakeeperChart renders charts/quotakeeper as docs/operations.md
// installs it (release quotakeeper in ChartNamespace) with args.
func RenderQuotakeeperChart(helm string, args ...string) (Rendered, error) {
	root, err := checkout.Root()
	if err != nil {
		return Rendered{}, err
	}
	return RenderChart(helm, filepath.Join(root, "charts", "quotakeeper"), "quotakeeper", ChartNamespace, args...)
}

// Installed returns the objects helm install creates and keeps: all but
// hooks (a hook runs at its phase and is deleted, as the chart's pre-delete
// uninstall Job and its RBAC, or Gatekeeper's CRD upgrade Job, are).
func (r Rendered) Installed() Rendered {
	var out Rendered
	for _, obj := range r {
		if _, hook := obj.GetAnnotations()["helm.sh/hook"]; !hook {
			out = append(out, obj)
		}
	}
	return out
}

// Kinds returns the objects of those kinds, in order.
func (r Rendered) Kinds(kinds ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, obj := range r {
		if slices.Contains(kinds, obj.GetKind()) {
			out = append(out, obj)
		}
	}
	return out
}

// Object returns the object of that kind and name, or an error naming both.
func (r Rendered) Object(kind, name string) (*unstructured.Unstructured, error) {
	for _, obj := range r.Kinds(kind) {
		if obj.GetName() == name {
			return obj, nil
		}
	}
	return nil, fmt.Errorf("the chart renders no %s %s", kind, name)
}

// typed converts the objects of kind to T (a pointer to a typed API object).
func typed[T any](r Rendered, kind string) ([]*T, error) {
	var out []*T
	for _, obj := range r.Kinds(kind) {
		t := new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, t); err != nil {
			return nil, fmt.Errorf("%s %s: %w", kind, obj.GetName(), err)
		}
		out = append(out, t)
	}
	return out, nil
}

// PluginSettingsConfigMap is the chart's ConfigMap of the plugin's
// settings, in Gatekeeper's namespace.
const PluginSettingsConfigMap = "quotakeeper-plugin"

// renderChart renders the chart the bed installs: the defaults, with
// Options.ReservationTTL as reservationTTL when set.
func (c *Cluster) renderChart() (Rendered, error) {
	helm, err := c.helm()
	if err != nil {
		return nil, err
	}
	var args []string
	if c.opts.ExternalData {
		args = append(args, "--set", "admission=externalData")
	}
	if c.opts.ReservationTTL != 0 {
		args = append(args, "--set", "reservationTTL="+c.opts.ReservationTTL.String())
	}
	return RenderQuotakeeperChart(helm, args...)
}

// helm is Options.Helm, else HelmBinary().
func (c *Cluster) helm() (string, error) {
	if c.opts.Helm != "" {
		return c.opts.Helm, nil
	}
	return HelmBinary()
}

// bedManagerFlags are the chart's manager flags the bed sets itself: where
// a process on this machine listens and finds its certificate.
var bedManagerFlags = []string{"--webhook-port", "--cert-dir", "--external-data-bind-address"}

// managerArgs are the flags of the chart's manager Deployment, less
// bedManagerFlags.
func (r Rendered) managerArgs() ([]string, error) {
	d, err := r.managerDeployment()
	if err != nil {
		return nil, err
	}
	var args []string
	for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
		name, _, _ := strings.Cut(arg, "=")
		if !slices.Contains(bedManagerFlags, name) {
			args = append(args, arg)
		}
	}
	return args, nil
}

// managerDeployment is the chart's Deployment quotakeeper-manager, whose
// only container is the manager.
func (r Rendered) managerDeployment() (*appsv1.Deployment, error) {
	deployments, err := typed[appsv1.Deployment](r, "Deployment")
	if err != nil {
		return nil, err
	}
	for _, d := range deployments {
		if d.Name == "quotakeeper-manager" && len(d.Spec.Template.Spec.Containers) == 1 && d.Spec.Template.Spec.Containers[0].Name == "manager" {
			return d, nil
		}
	}
	return nil, errors.New("the chart renders no Deployment quotakeeper-manager with one container, manager")
}

// renderGatekeeperChart renders Gatekeeper's stock chart from its module
// directory as docs/operations.md installs it (release gatekeeper in
// GatekeeperNamespace, config/gatekeeper/values.yaml or
// values-external-data.yaml, and values-all-kinds.yaml unless
// Options.ShippedRulesOnly), for the Kubernetes
// release the control plane runs: helm template otherwise assumes 1.20, and
// the chart renders the webhook's matchConditions only from 1.28 on.
func (c *Cluster) renderGatekeeperChart(moduleDir string) (Rendered, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	server, err := dc.ServerVersion()
	if err != nil {
		return nil, err
	}
	helm, err := c.helm()
	if err != nil {
		return nil, err
	}
	root, err := checkout.Root()
	if err != nil {
		return nil, err
	}
	values := []string{"values.yaml"}
	if c.opts.ExternalData {
		values = []string{"values-external-data.yaml"}
	}
	if !c.opts.ShippedRulesOnly {
		values = append(values, "values-all-kinds.yaml")
	}
	kube, err := kubeVersion(server.GitVersion, c.env.BinaryAssetsDirectory)
	if err != nil {
		return nil, err
	}
	args := []string{"--kube-version", kube}
	for _, v := range values {
		args = append(args, "-f", filepath.Join(root, "config", "gatekeeper", v))
	}
	return RenderChart(helm, filepath.Join(moduleDir, "charts", "gatekeeper"), "gatekeeper", GatekeeperNamespace, args...)
}

// assetsVersion is the Kubernetes release in the name of a testbin
// directory (bin/testbin/k8s-v1.36.3-etcd-v3.6.16).
var assetsVersion = regexp.MustCompile(`^k8s-(v1\.[0-9]+\.[0-9]+)-`)

// kubeVersion is the release helm template renders for: the API server's
// own, or, when that is a source build's v0.0.0-master (as bin/testbin's
// kube-apiserver reports), the release its testbin directory is named
// after. Rendering for v0.0.0 left out everything the stock chart renders
// only from 1.28 on, the webhook's matchConditions among them.
func kubeVersion(server, assets string) (string, error) {
	if v, err := version.ParseSemantic(server); err == nil && v.Major() >= 1 {
		return server, nil
	}
	m := assetsVersion.FindStringSubmatch(filepath.Base(assets))
	if m == nil {
		return "", fmt.Errorf("the API server reports version %q and its binaries' directory %s names none", server, assets)
	}
	return m[1], nil
}
