package localcluster

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// makefileKubeVersion is the Kubernetes release the Makefile builds and
// verify renders for (KUBE_VERSION): the stock chart renders the webhook's
// matchConditions only from 1.28 on, and helm template assumes 1.20.
func makefileKubeVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^KUBE_VERSION \?= (v1\.[0-9]+\.[0-9]+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("the Makefile sets no KUBE_VERSION")
	}
	return string(m[1])
}

// renderStockGatekeeper renders Gatekeeper's stock chart, from the module
// go.mod pins, as docs/install-*.md install it, with the values files of
// config/gatekeeper.
func renderStockGatekeeper(t *testing.T, values ...string) Rendered {
	t.Helper()
	dir, err := gatekeeperModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--kube-version", makefileKubeVersion(t)}
	for _, v := range values {
		args = append(args, "-f", filepath.Join(testenv.RepoRoot(), "config", "gatekeeper", v))
	}
	r, err := RenderChart(helmOrSkip(t), filepath.Join(dir, "charts", "gatekeeper"), "gatekeeper", GatekeeperNamespace, args...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Done when (make verify runs this): Gatekeeper's stock chart, rendered with
// the values we ship in each mode, alone and with the all-kinds opt-in,
// installs a webhook that cannot lock the cluster: its namespaceSelector
// leaves out kube-system, kube-node-lease, quotakeeper-system and
// gatekeeper-system by name, its matchConditions leave out quota objects,
// Leases, Events and namespaces without a consumer label, the check of
// Gatekeeper's ignore label fails open, both Deployments accept the ignore
// label in those namespaces, and the rules are the counted kinds unless
// opted into every kind.
func TestStockChartRendersOurValues(t *testing.T) {
	exempt := []string{"kube-system", "kube-node-lease", quotav1alpha1.DefaultSystemNamespace, GatekeeperNamespace}
	for _, tc := range []struct {
		values   []string
		allKinds bool
	}{
		{[]string{"values.yaml"}, false},
		{[]string{"values.yaml", "values-all-kinds.yaml"}, true},
		{[]string{"values-external-data.yaml"}, false},
		{[]string{"values-external-data.yaml", "values-all-kinds.yaml"}, true},
	} {
		t.Run(filepath.Join(tc.values...), func(t *testing.T) {
			r := renderStockGatekeeper(t, tc.values...)
			validating, err := typed[admissionregistrationv1.ValidatingWebhookConfiguration](r, "ValidatingWebhookConfiguration")
			if err != nil || len(validating) != 1 {
				t.Fatalf("ValidatingWebhookConfigurations %d, %v: want one", len(validating), err)
			}
			hooks := map[string]admissionregistrationv1.ValidatingWebhook{}
			for _, w := range validating[0].Webhooks {
				hooks[w.Name] = w
			}
			v := hooks["validation.gatekeeper.sh"]
			if got := ptrValue(v.FailurePolicy); got != admissionregistrationv1.Fail {
				t.Errorf("validation.gatekeeper.sh failurePolicy %s, want Fail", got)
			}
			if got := notIn(v.NamespaceSelector); !slices.Equal(got, exempt) {
				t.Errorf("validation.gatekeeper.sh leaves out namespaces %v, want %v", got, exempt)
			}
			var names []string
			for _, mc := range v.MatchConditions {
				names = append(names, mc.Name)
			}
			if want := []string{"not-quota-objects", "not-leases", "not-events", "namespaces-with-consumer-labels"}; !slices.Equal(names, want) {
				t.Errorf("validation.gatekeeper.sh matchConditions %v, want %v", names, want)
			}
			wildcard := len(v.Rules) == 1 && slices.Equal(v.Rules[0].Resources[:1], []string{"*"})
			if wildcard != tc.allKinds {
				t.Errorf("validation.gatekeeper.sh rules %+v: every kind %v, want %v", v.Rules, wildcard, tc.allKinds)
			}
			if got := ptrValue(hooks["check-ignore-label.gatekeeper.sh"].FailurePolicy); got != admissionregistrationv1.Ignore {
				t.Errorf("check-ignore-label.gatekeeper.sh failurePolicy %s, want Ignore", got)
			}
			mutating, err := typed[admissionregistrationv1.MutatingWebhookConfiguration](r, "MutatingWebhookConfiguration")
			if err != nil || len(mutating) != 1 || len(mutating[0].Webhooks) == 0 {
				t.Fatalf("MutatingWebhookConfigurations %d, %v: want one", len(mutating), err)
			}
			if got := notIn(mutating[0].Webhooks[0].NamespaceSelector); !slices.Equal(got, exempt) {
				t.Errorf("mutation.gatekeeper.sh leaves out namespaces %v, want %v", got, exempt)
			}
			deployments, err := typed[appsv1.Deployment](r, "Deployment")
			if err != nil || len(deployments) != 2 {
				t.Fatalf("Deployments %d, %v: want the controller manager and audit", len(deployments), err)
			}
			for _, d := range deployments {
				args := d.Spec.Template.Spec.Containers[0].Args
				for _, ns := range exempt {
					if !slices.Contains(args, "--exempt-namespace="+ns) {
						t.Errorf("Deployment %s lacks --exempt-namespace=%s: %v", d.Name, ns, args)
					}
				}
			}
		})
	}
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// notIn is the values of a selector's kubernetes.io/metadata.name NotIn
// expression: the namespaces left out by name.
func notIn(s *metav1.LabelSelector) []string {
	if s == nil {
		return nil
	}
	for _, e := range s.MatchExpressions {
		if e.Key == "kubernetes.io/metadata.name" && e.Operator == metav1.LabelSelectorOpNotIn {
			return e.Values
		}
	}
	return nil
}
