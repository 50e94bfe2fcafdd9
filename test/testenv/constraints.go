package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	constraintclient "github.com/open-policy-agent/frameworks/constraint/pkg/client"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/drivers/rego"
	"github.com/open-policy-agent/frameworks/constraint/pkg/core/templates"
	"github.com/open-policy-agent/gatekeeper/v3/apis"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/reader"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/target"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/util"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// InstallConstraintCRD installs the CRD of the constraint kind of a shipped
// template (templates/<name>/template.yaml), made as Gatekeeper's template
// controller makes it, so that an envtest suite without Gatekeeper can
// hold that template's constraints. It returns the template, as the object
// to create and as the frameworks read it.
func InstallConstraintCRD(ctx context.Context, cfg *rest.Config, name string) (*unstructured.Unstructured, *templates.ConstraintTemplate, error) {
	data, err := os.ReadFile(filepath.Join(RepoRoot(), "templates", name, "template.yaml"))
	if err != nil {
		return nil, nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := utilyaml.Unmarshal(data, &obj.Object); err != nil {
		return nil, nil, fmt.Errorf("template %s: %w", name, err)
	}
	scheme := runtime.NewScheme()
	if err := apis.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	tmpl, err := reader.ToTemplate(scheme, obj)
	if err != nil {
		return nil, nil, fmt.Errorf("template %s: %w", name, err)
	}
	driver, err := rego.New()
	if err != nil {
		return nil, nil, err
	}
	cc, err := constraintclient.NewClient(constraintclient.Targets(&target.K8sValidationTarget{}), constraintclient.Driver(driver),
		constraintclient.EnforcementPoints(util.WebhookEnforcementPoint))
	if err != nil {
		return nil, nil, err
	}
	internal, err := cc.CreateCRD(ctx, tmpl)
	if err != nil {
		return nil, nil, fmt.Errorf("constraint CRD of %s: %w", name, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_apiextensions_CustomResourceDefinition_To_v1_CustomResourceDefinition(internal, crd, nil); err != nil {
		return nil, nil, err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}}); err != nil {
		return nil, nil, err
	}
	return obj, tmpl, nil
}

// InstallTemplateObjects installs Gatekeeper's ConstraintTemplate CRD (from
// its module, the release go.mod pins) and creates the shipped templates
// named (templates/<name>/template.yaml) as objects, for suites without
// Gatekeeper whose code reads templates: the QuotaBypass guard checks that
// a kind is made by a quota template. No Gatekeeper acts on them here;
// InstallConstraintCRD makes their constraint kinds.
func InstallTemplateObjects(ctx context.Context, cfg *rest.Config, names ...string) error {
	out, err := exec.Command("go", "list", "-mod=mod", "-m", "-f", "{{.Dir}}", "github.com/open-policy-agent/gatekeeper/v3").Output()
	if err != nil {
		return fmt.Errorf("find Gatekeeper's module directory: %w", err)
	}
	crd := filepath.Join(strings.TrimSpace(string(out)), "charts", "gatekeeper", "crds", "constrainttemplate-customresourcedefinition.yaml")
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{crd}, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("ConstraintTemplate CRD: %w", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(RepoRoot(), "templates", name, "template.yaml"))
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(data, &obj.Object); err != nil {
			return fmt.Errorf("template %s: %w", name, err)
		}
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("template %s: %w", name, err)
		}
	}
	return nil
}
