package servingcert_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/quotakeeper/quotakeeper/internal/externaldata"
	"github.com/quotakeeper/quotakeeper/internal/servingcert"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// The suite runs the manager's certificate wiring (the rotator, the
// Secret's watch, the webhook server, the External Data provider and
// /readyz) against a real kube-apiserver, as the manager does, with a
// certificate directory that never gets the files: no kubelet refreshes a
// Secret volume here.
var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// fresh bounds how long a fresh install may take to serve: the rotator
// writes the Secret once its cache has synced, and the watch sees it at
// once (under a second here); the margin is for a loaded two-core machine
// running the race detector. Before, it waited for the kubelet (95 s).
const fresh = 10 * time.Second

const service = "quotakeeper-webhook-service"

// TestServesTheSecretsCertificateBeforeTheVolumeHasIt: on a fresh install
// (the Secret empty, as the chart ships it) the webhook server and the
// provider present the certificate the rotator wrote into the Secret, which
// the CA bundle it wrote into the webhook configuration verifies, and
// /readyz passes, within seconds, while the certificate directory is still
// empty.
func TestServesTheSecretsCertificateBeforeTheVolumeHasIt(t *testing.T) {
	run := start(t, "fresh-install", "")
	began := time.Now()
	testenv.Eventually(t, fresh, "both servers present the Secret's certificate and /readyz passes", func() error {
		if _, err := run.presentsTheSecretsCertificate(); err != nil {
			return err
		}
		return run.ready()
	})
	t.Logf("served and ready %s after the manager started", time.Since(began).Round(time.Millisecond))
	if files, err := os.ReadDir(run.certDir); err != nil || len(files) != 0 {
		t.Fatalf("the certificate directory holds %d files (%v); want it empty, as a volume the kubelet has not refreshed", len(files), err)
	}
}

// TestServesARotatedCertificate: when the rotator issues a new CA and
// certificate into the Secret (here because its contents were lost), both
// servers present the new one, which the new CA bundle verifies, without a
// restart.
func TestServesARotatedCertificate(t *testing.T) {
	run := start(t, "rotation", "")
	var first []byte
	testenv.Eventually(t, fresh, "both servers present the Secret's first certificate", func() (err error) {
		first, err = run.presentsTheSecretsCertificate()
		return err
	})

	secret := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), run.secret, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data = nil
	if err := env.Client.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "both servers present the rotated certificate", func() error {
		served, err := run.presentsTheSecretsCertificate()
		if err != nil {
			return err
		}
		if bytes.Equal(served, first) {
			return errors.New("still the first certificate")
		}
		return nil
	})
}

// TestWithoutRotationServesTheCertDirsFiles: with rotation off (the
// chart's manager.certRotation=false) the servers present the certificate
// something else (cert-manager) wrote into the certificate directory, and
// /readyz passes.
func TestWithoutRotationServesTheCertDirsFiles(t *testing.T) {
	dnsName := service + ".quotakeeper-system.svc"
	issuer := &rotator.CertRotator{
		CAName: "cert-manager-ca", DNSName: dnsName,
		ExtKeyUsages: &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	ca, err := issuer.CreateCACert(time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err := issuer.CreateCertPEM(ca, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := start(t, "no-rotation", dir)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	block, _ := pem.Decode(crt)
	testenv.Eventually(t, fresh, "both servers present the files' certificate and /readyz passes", func() error {
		if err := run.presents(roots, dnsName, block.Bytes); err != nil {
			return err
		}
		return run.ready()
	})
}

// run is one manager serving with the certificate, in a namespace of its
// own.
type run struct {
	secret                    types.NamespacedName
	configuration             string
	certDir                   string
	webhookAddr, providerAddr string
	probeAddr                 string
}

// runs counts start's runs in this process.
var runs int

// start runs a manager serving the webhook server and the provider as
// cmd/quotakeeper-manager does, until the test ends: without certDir, with
// the rotator on, after creating namespace ns, the empty Secret the chart
// ships and a ValidatingWebhookConfiguration named after ns, and an empty
// certificate directory; with certDir, serving its files.
func start(t *testing.T, ns, certDir string) *run {
	t.Helper()
	if env == nil {
		t.Skip("needs a control plane; skipped in -short mode")
	}
	ctx := context.Background()
	runs++ // names of its own under -count
	ns = fmt.Sprintf("%s-%d", ns, runs)
	r := &run{
		secret:        types.NamespacedName{Namespace: ns, Name: "quotakeeper-webhook-server-cert"},
		configuration: ns + "-validating-webhook-configuration",
		certDir:       certDir,
	}
	ports := make([]int, 3)
	for i := range ports {
		port, err := testenv.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = port
	}
	r.webhookAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	r.providerAddr = fmt.Sprintf("127.0.0.1:%d", ports[1])
	r.probeAddr = fmt.Sprintf("127.0.0.1:%d", ports[2])
	rotate := certDir == ""
	if rotate {
		r.certDir = t.TempDir()
		for _, obj := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.secret.Name}},
			validatingConfiguration(r.configuration, r.webhookAddr),
		} {
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
	}

	cert := servingcert.New(servingcert.Options{
		Rotate:         rotate,
		Secret:         r.secret,
		Service:        service,
		CertDir:        r.certDir,
		Webhooks:       []rotator.WebhookInfo{{Name: r.configuration, Type: rotator.Validating}},
		ControllerName: "cert-rotator-" + ns,
	})
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 scheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: r.probeAddr,
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: "127.0.0.1", Port: ports[0], CertDir: r.certDir, TLSOpts: cert.TLSOpts(),
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.Add(mgr); err != nil {
		t.Fatal(err)
	}
	// The certificate is what is tested, not the caller: any client.
	if err := mgr.Add(&externaldata.Server{Addr: r.providerAddr, CertDir: r.certDir, TLSOpts: cert.TLSOpts(), AllowAnyClient: true}); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return r
}

// presentsTheSecretsCertificate checks that the webhook server and the
// provider both present the Secret's tls.crt, verified as the API server
// verifies a webhook: against the CA bundle the rotator wrote into the
// webhook configuration, for the Service's name. It returns the
// certificate (DER).
func (r *run) presentsTheSecretsCertificate() ([]byte, error) {
	ctx := context.Background()
	configuration := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: r.configuration}, configuration); err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(configuration.Webhooks[0].ClientConfig.CABundle) {
		return nil, errors.New("no CA bundle in the webhook configuration yet")
	}
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, r.secret, secret); err != nil {
		return nil, err
	}
	block, _ := pem.Decode(secret.Data[corev1.TLSCertKey])
	if block == nil {
		return nil, errors.New("no certificate in the Secret yet")
	}
	return block.Bytes, r.presents(roots, fmt.Sprintf("%s.%s.svc", service, r.secret.Namespace), block.Bytes)
}

// presents checks that the webhook server and the provider both present
// the certificate want (DER), verified against roots for serverName.
func (r *run) presents(roots *x509.CertPool, serverName string, want []byte) error {
	for _, server := range []struct{ name, addr string }{{"webhook server", r.webhookAddr}, {"provider", r.providerAddr}} {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", server.addr, &tls.Config{
			RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12,
		})
		if err != nil {
			return fmt.Errorf("%s: %w", server.name, err)
		}
		served := conn.ConnectionState().PeerCertificates[0].Raw
		_ = conn.Close()
		if !bytes.Equal(served, want) {
			return fmt.Errorf("%s: presents another certificate", server.name)
		}
	}
	return nil
}

// ready checks /readyz answers 200.
func (r *run) ready() error {
	resp, err := http.Get("http://" + r.probeAddr + "/readyz")
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s", resp.Status)
	}
	return nil
}

// validatingConfiguration is a webhook configuration whose CA bundle the
// rotator keeps; its rule matches nothing, so the API server never calls it.
func validatingConfiguration(name, addr string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	none := admissionregistrationv1.SideEffectClassNone
	ignore := admissionregistrationv1.Ignore
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "check.servingcert.test",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + addr + "/validate")},
			SideEffects:             &none,
			FailurePolicy:           &ignore,
			AdmissionReviewVersions: []string{"v1"},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{"servingcert.test"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"},
				},
			}},
		}},
	}
}
