package localcluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The bed's serving certificate, which the manager and every Gatekeeper
// replica serve, is issued for client auth too: Gatekeeper presents its
// webhook certificate as its client certificate to External Data providers,
// and the manager's provider verifies it (mTLS) against the CA in
// Gatekeeper's gatekeeper-webhook-server-cert Secret, as in a cluster where
// Gatekeeper's rotator issues it so when External Data is on. envtest's own
// certificate is for server auth only.

// issueServingCert writes a CA of its own and a certificate for 127.0.0.1
// and localhost, for server and client auth, into dir (tls.crt, tls.key),
// and returns the CA's PEM. The certificate names Gatekeeper's webhook
// Service too, as Gatekeeper's does in a cluster: the provider authorizes
// Gatekeeper by that name (the chart's externalData.clientNames).
func issueServingCert(dir string) ([]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "quotakeeper-bed-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost", "gatekeeper-webhook-service." + GatekeeperNamespace + ".svc"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	for name, block := range map[string]*pem.Block{
		"tls.crt": {Type: "CERTIFICATE", Bytes: leafDER},
		"tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			return nil, err
		}
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

// gatekeeperCertSecret writes what Gatekeeper's rotator keeps in its
// gatekeeper-webhook-server-cert Secret (the bed's Gatekeeper runs with
// --disable-cert-rotation): the CA the manager's provider verifies
// Gatekeeper's client certificate with.
func (c *Cluster) gatekeeperCertSecret(ctx context.Context) error {
	certPEM, err := os.ReadFile(filepath.Join(c.CertDir(), "tls.crt"))
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(filepath.Join(c.CertDir(), "tls.key"))
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: GatekeeperNamespace, Name: "gatekeeper-webhook-server-cert"},
		Data:       map[string][]byte{"ca.crt": c.CAData(), "tls.crt": certPEM, "tls.key": keyPEM},
	}
	if err := c.Client.Create(ctx, secret); err != nil {
		return fmt.Errorf("the certificate Secret of Gatekeeper: %w", err)
	}
	return nil
}
