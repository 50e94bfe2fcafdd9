package externaldata_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	frameworks "github.com/open-policy-agent/frameworks/constraint/pkg/externaldata"

	"github.com/quotakeeper/quotakeeper/internal/externaldata"
	"github.com/quotakeeper/quotakeeper/internal/freeport"
)

// gatekeeperName is the name Gatekeeper's webhook certificate carries.
const gatekeeperName = "gatekeeper-webhook-service.gatekeeper-system.svc"

// With a client CA the provider answers only a client presenting a
// certificate that CA signed (Gatekeeper presents its webhook certificate,
// issued for client auth too when External Data is on) and that names
// Gatekeeper's Service, and refuses the handshake of any other: no
// certificate, another CA's, or one the same CA signed for another name.
func TestServerWithClientCARequiresGatekeepersCertificate(t *testing.T) {
	dir := t.TempDir()
	serverCA := newCA(t, "server-ca")
	serverCA.issue(t, dir, "tls", nil, x509.ExtKeyUsageServerAuth)
	gatekeeperCA := newCA(t, "gatekeeper-ca")
	clientCert := gatekeeperCA.issue(t, dir, "gatekeeper", []string{gatekeeperName}, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	sameCAOtherName := gatekeeperCA.issue(t, dir, "other", []string{"other.gatekeeper-system.svc"}, x509.ExtKeyUsageClientAuth)
	stranger := newCA(t, "stranger-ca").issue(t, dir, "stranger", []string{gatekeeperName}, x509.ExtKeyUsageClientAuth)
	caFile := filepath.Join(dir, "gatekeeper-ca.crt")
	if err := os.WriteFile(caFile, gatekeeperCA.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := freeport.Get()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := &externaldata.Server{Addr: addr, CertDir: dir, ClientCA: externaldata.ClientCAFile(caFile), ClientNames: []string{gatekeeperName}}
	go func() { _ = srv.Start(ctx) }()

	call := func(cert *tls.Certificate) (*http.Response, error) {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(serverCA.pem)
		config := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}
		if cert != nil {
			config.Certificates = []tls.Certificate{*cert}
		}
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: config}, Timeout: 5 * time.Second}
		body, _ := json.Marshal(frameworks.NewProviderRequest([]string{`{"builtin": "quota.quantity", "args": ["2", ""], "request": ""}`}))
		return client.Post("https://"+addr+externaldata.Path, "application/json", bytes.NewReader(body))
	}
	var resp *http.Response
	deadline := time.Now().Add(10 * time.Second)
	for resp, err = call(&clientCert); err != nil && time.Now().Before(deadline); resp, err = call(&clientCert) {
		time.Sleep(50 * time.Millisecond) // the server starting
	}
	if err != nil {
		t.Fatalf("Gatekeeper's certificate: %v", err)
	}
	var got frameworks.ProviderResponse
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(got.Response.Items) != 1 || fmt.Sprint(got.Response.Items[0].Value) != "2" {
		t.Fatalf("Gatekeeper's certificate: status %d, response %+v; want 200 and the value 2", resp.StatusCode, got.Response)
	}
	for name, c := range map[string]struct {
		cert *tls.Certificate
		want string
	}{
		"no certificate":                  {nil, "certificate required"},
		"another CA's certificate":        {&stranger, "certificate required"}, // Go's client sends none the server's CAs did not sign
		"the same CA's, for another name": {&sameCAOtherName, "bad certificate"},
	} {
		resp, err := call(c.cert)
		if err == nil {
			_ = resp.Body.Close()
			t.Errorf("%s: answered %d, want the handshake refused", name, resp.StatusCode)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// A provider with no client CA would answer every pod that reaches it:
// it does not start unless told to allow any client.
func TestServerWithoutClientCARefusesToStart(t *testing.T) {
	err := (&externaldata.Server{Addr: "127.0.0.1:0", CertDir: t.TempDir()}).Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no client CA") {
		t.Fatalf("Start without a client CA: %v, want a refusal naming the missing client CA", err)
	}
}

type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes <name>.crt and <name>.key for 127.0.0.1 and dnsNames into
// dir and returns the pair.
func (c ca) issue(t *testing.T, dir, name string, dnsNames []string, usages ...x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: dnsNames, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usages,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}
