package node

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// testMetricsNeedAToken scrapes every manager pod's metrics port as a
// Prometheus does with the chart's ServiceMonitor: over HTTPS, presenting
// the token of a ServiceAccount bound to quotakeeper-metrics-reader (what
// metrics.readers binds), checking the certificate against the webhook
// configurations' CA bundle under the webhook Service's name. Without a
// token the endpoint answers 401 and shows nothing.
func testMetricsNeedAToken(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "monitoring")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prometheus"}}
	if _, err := bed.Clientset.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "node-e2e-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quotakeeper-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}},
	}
	if _, err := bed.Clientset.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = bed.Clientset.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
		_ = bed.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	expiry := int64(600)
	tr, err := bed.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	webhooks, err := bed.Clientset.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "quotakeeper-mutating-webhook-configuration", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if len(webhooks.Webhooks) == 0 || !roots.AppendCertsFromPEM(webhooks.Webhooks[0].ClientConfig.CABundle) {
		t.Fatal("the mutating webhook configuration holds no CA bundle")
	}
	scraper := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: "quotakeeper-webhook-service." + localcluster.ChartNamespace + ".svc", MinVersion: tls.VersionTLS12,
	}}}
	scrape := func(url, token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := scraper.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	for _, p := range livePods(t, localcluster.ChartNamespace, managerPods) {
		url := fmt.Sprintf("https://%s:8080/metrics", p.Status.PodIP)
		testenv.Eventually(t, time.Minute, "pod "+p.Name+" serves its metrics to the reader's token", func() error {
			code, body, err := scrape(url, tr.Status.Token)
			if err != nil {
				return err
			}
			if code != http.StatusOK || !strings.Contains(body, "controller_runtime_reconcile_total") {
				return fmt.Errorf("%s: %d %.200q", url, code, body)
			}
			return nil
		})
		code, body, err := scrape(url, "")
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusUnauthorized || strings.Contains(body, "controller_runtime") {
			t.Errorf("%s without a token: %d %.200q, want 401 and no metrics", url, code, body)
		}
		t.Logf("pod %s: metrics over HTTPS to the reader's token; 401 without one", p.Name)
	}
}
