package node

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// What docs/operations.md#stock-gatekeeper-external-data's install says
// beyond the builtin mode's: the test runs these and fails if the section
// stops saying them.
var stockDocs = []string{
	"helm install gatekeeper gatekeeper/gatekeeper --version 3.23.1",
	"-n gatekeeper-system --create-namespace -f config/gatekeeper/values-external-data.yaml",
	"helm install quotakeeper charts/quotakeeper -n quotakeeper-system --create-namespace",
	"--set admission=externalData",
}

var providerGVK = schema.GroupVersionKind{Group: "externaldata.gatekeeper.sh", Version: "v1beta1", Kind: "Provider"}

// testStockChartsInstallAsDocumented installs, on the cluster the uninstall
// left, Gatekeeper's stock chart with config/gatekeeper/values-external-data.yaml
// and stock Gatekeeper's image, then our chart with admission=externalData,
// as docs/operations.md#stock-gatekeeper-external-data does, and checks the
// pods as the builtin mode's install does, and the Provider Gatekeeper
// calls: the manager's Service by its DNS name, with the CA the manager
// wrote.
func testStockChartsInstallAsDocumented(t *testing.T) {
	requireDocsSay(t, "Stock Gatekeeper (External Data)", stockDocs)
	// No image of ours in Gatekeeper's release: stock Gatekeeper's image
	// (openpolicyagent/gatekeeper:v3.23.1 in a cluster; here the same
	// release built from its module, imported under its own name).
	image := stockImage(t)
	if _, tag, _ := strings.Cut(image, ":"); tag != stockRelease {
		t.Fatalf("stock Gatekeeper's image is tagged %s, want the release %s", tag, stockRelease)
	}
	installGatekeeperChart(t, "values-external-data.yaml", image)
	helm(t, append(installOurChart(t, "admission=externalData"), "--wait", "--timeout", "5m")...)
	// Stock Gatekeeper starts without quotakeeper (no plugin): no restart,
	// only its rollout awaited.
	for _, d := range []string{"deployment/gatekeeper-controller-manager", "deployment/gatekeeper-audit"} {
		kubectl(t, "-n", localcluster.GatekeeperNamespace, "rollout", "status", d, "--timeout=5m")
	}
	for _, ns := range []string{localcluster.GatekeeperNamespace, localcluster.ChartNamespace} {
		checkPodsReady(t, ns)
	}
	for _, p := range livePods(t, localcluster.GatekeeperNamespace, gatekeeperPods) {
		if got := p.Spec.Containers[0].Image; got != stockImage(t) {
			t.Fatalf("Gatekeeper pod %s runs %s, want stock Gatekeeper's %s", p.Name, got, stockImage(t))
		}
	}

	c := quotaClient(t)
	provider := &unstructured.Unstructured{}
	provider.SetGroupVersionKind(providerGVK)
	wantURL := fmt.Sprintf("https://quotakeeper-webhook-service.%s.svc:9444/v1/quota", localcluster.ChartNamespace)
	testenv.Eventually(t, 2*time.Minute, "Provider quotakeeper with the manager's CA", func() error {
		if err := c.Get(t.Context(), client.ObjectKey{Name: "quotakeeper"}, provider); err != nil {
			return err
		}
		url, _, _ := unstructured.NestedString(provider.Object, "spec", "url")
		if url != wantURL {
			return fmt.Errorf("url %q, want %q", url, wantURL)
		}
		ca, _, _ := unstructured.NestedString(provider.Object, "spec", "caBundle")
		if pem, err := base64.StdEncoding.DecodeString(ca); err != nil || !strings.Contains(string(pem), "BEGIN CERTIFICATE") {
			return fmt.Errorf("caBundle %.40q is not a CA the manager wrote", ca)
		}
		return nil
	})
	t.Logf("Provider quotakeeper: url %s, caBundle written by the manager", wantURL)

	// The provider's Service, which Gatekeeper's pods reach by name: its
	// ClusterIP (kube-proxy) and its endpoints, the manager pods.
	svc, err := bed.Clientset.CoreV1().Services(localcluster.ChartNamespace).Get(t.Context(), "quotakeeper-webhook-service", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Service %s/%s: ClusterIP %s, ports %v", svc.Namespace, svc.Name, svc.Spec.ClusterIP, servicePorts(svc.Spec.Ports))
}

func servicePorts(ports []corev1.ServicePort) []string {
	var out []string
	for _, p := range ports {
		out = append(out, fmt.Sprintf("%s %d->%s", p.Name, p.Port, p.TargetPort.String()))
	}
	return out
}
