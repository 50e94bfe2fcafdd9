package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

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
