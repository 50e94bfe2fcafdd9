package servingcert

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
)

// issue returns a serving certificate and its key (PEM) valid until notAfter.
func issue(t *testing.T, notAfter time.Time) (crt, key []byte) {
	t.Helper()
	issuer := &rotator.CertRotator{CAName: "test-ca", DNSName: "quotakeeper-webhook-service.quotakeeper-system.svc",
		ExtKeyUsages: &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	begin := time.Now().Add(-time.Hour)
	ca, err := issuer.CreateCACert(begin, notAfter.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err = issuer.CreateCertPEM(ca, begin, notAfter)
	if err != nil {
		t.Fatal(err)
	}
	return crt, key
}

// served is what the manager's metrics endpoint reports as the serving
// certificate's expiry: the registry RegisterManager fills.
func served(t *testing.T) time.Time {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := quotav1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterManager(reg, fake.NewClientBuilder().WithScheme(scheme).Build()); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "quotakeeper_serving_certificate_expiration_timestamp_seconds" {
			return time.Unix(int64(f.GetMetric()[0].GetGauge().GetValue()), 0)
		}
	}
	t.Fatal("no quotakeeper_serving_certificate_expiration_timestamp_seconds")
	return time.Time{}
}

// With rotation, each key pair loaded from the Secret is the one whose
// expiry the metric reports.
func TestTheSecretsCertificateExpiryIsReported(t *testing.T) {
	c := New(Options{Rotate: true})
	c.log = logr.Discard()
	for _, notAfter := range []time.Time{time.Now().Add(48 * time.Hour).Truncate(time.Second), time.Now().Add(365 * 24 * time.Hour).Truncate(time.Second)} {
		crt, key := issue(t, notAfter)
		c.load(&corev1.Secret{Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}})
		if got := served(t); !got.Equal(notAfter) {
			t.Errorf("reported expiry %v, want the loaded certificate's %v", got, notAfter)
		}
	}
}

// Without rotation, the certificate file the servers read (something else
// writes it) is the one whose expiry the metric reports, read when the
// manager starts.
func TestTheCertDirsCertificateExpiryIsReported(t *testing.T) {
	notAfter := time.Now().Add(72 * time.Hour).Truncate(time.Second)
	crt, _ := issue(t, notAfter)
	path := filepath.Join(t.TempDir(), corev1.TLSCertKey)
	if err := os.WriteFile(path, crt, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // one read, then Start returns
	if err := (&certFile{path: path, log: logr.Discard()}).Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := served(t); !got.Equal(notAfter) {
		t.Errorf("reported expiry %v, want the file's certificate's %v", got, notAfter)
	}
	if _, err := readNotAfter(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("readNotAfter of a missing file: no error")
	}
}
