package externaldata

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
)

// Server serves the provider over TLS, with the certificate the manager's
// webhooks serve: TLSOpts's, or else tls.crt and tls.key in CertDir, re-read
// when they change, as controller-runtime's webhook server does. It is a
// controller-runtime Runnable that every replica runs: each one answers.
type Server struct {
	// Addr is where it listens, host:port.
	Addr string
	// CertDir holds tls.crt and tls.key, read unless TLSOpts set
	// GetCertificate.
	CertDir string
	// TLSOpts change the server's tls.Config, as controller-runtime's
	// webhook.Options.TLSOpts do: the manager's set GetCertificate to the
	// certificate in its rotator's Secret (package servingcert).
	TLSOpts []func(*tls.Config)
	// Env is what the builtins decide against (Handler.Env).
	Env func() *builtins.Env
	// ClientCA, when set, reads the PEM of the CA that signed Gatekeeper's
	// certificate (Gatekeeper presents its webhook certificate as its
	// client certificate to every provider): a request without a
	// certificate it verifies is refused, at the handshake and again by
	// the handler. It is read again every ClientCARefresh, so that a CA
	// Gatekeeper's rotator replaces is followed; until it has been read
	// once, every client is refused (fail closed).
	ClientCA func(ctx context.Context) ([]byte, error)
	// ClientCARefresh: default 30s.
	ClientCARefresh time.Duration
	// ClientNames, with ClientCA, authorize the caller and not only its
	// certificate chain: the verified client certificate must name one of
	// them (a DNS name of its subject alternative names; Gatekeeper's
	// names its webhook Service, gatekeeper-webhook-service.<namespace>.svc).
	// Empty: any certificate ClientCA signed.
	ClientNames []string
	// AllowAnyClient must be true for a server without ClientCA: Start
	// refuses to serve every pod that reaches it unless told so.
	AllowAnyClient bool
	// Log reports a client CA that cannot be read; default: discarded.
	Log logr.Logger
}

// NeedLeaderElection is false: every replica answers.
func (*Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	if s.ClientCA == nil && !s.AllowAnyClient {
		return errors.New("external data provider: no client CA, so any pod that reaches it could reserve in any bucket and read any consumer's usage; give Gatekeeper's CA, or allow any client explicitly")
	}
	config := &tls.Config{MinVersion: tls.VersionTLS13}
	for _, opt := range s.TLSOpts {
		opt(config)
	}
	if config.GetCertificate == nil {
		watcher, err := certwatcher.New(filepath.Join(s.CertDir, "tls.crt"), filepath.Join(s.CertDir, "tls.key"))
		if err != nil {
			return fmt.Errorf("external data provider: %w", err)
		}
		go func() { _ = watcher.Start(ctx) }()
		config.GetCertificate = watcher.GetCertificate
	}
	handler := Handler{Env: s.Env}
	if s.ClientCA != nil {
		var pool atomic.Pointer[x509.CertPool]
		go s.followClientCA(ctx, &pool)
		config.ClientAuth = tls.RequireAndVerifyClientCert
		if len(s.ClientNames) > 0 {
			config.VerifyConnection = s.verifyClientName
		}
		config.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := config.Clone()
			c.GetConfigForClient = nil
			if c.ClientCAs = pool.Load(); c.ClientCAs == nil {
				c.ClientCAs = x509.NewCertPool() // not read yet: nobody verifies
			}
			return c, nil
		}
		handler.RequireClientCertificate = true
		handler.ClientNames = s.ClientNames
	}
	mux := http.NewServeMux()
	mux.Handle(Path, handler)
	srv := &http.Server{Handler: mux, TLSConfig: config, ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("external data provider: %w", err)
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("external data provider: %w", err)
	}
	return nil
}

// verifyClientName refuses, at the handshake, a client whose verified
// certificate names none of ClientNames.
func (s *Server) verifyClientName(cs tls.ConnectionState) error {
	if err := authorizeClient(cs.VerifiedChains, s.ClientNames); err != nil {
		s.Log.Info("refused a client", "reason", err.Error())
		return err
	}
	return nil
}

// authorizeClient is nil when the leaf of the first verified chain names
// one of names (as a DNS name of its subject alternative names).
func authorizeClient(chains [][]*x509.Certificate, names []string) error {
	if len(chains) == 0 || len(chains[0]) == 0 {
		return errors.New("no verified client certificate")
	}
	leaf := chains[0][0]
	for _, name := range leaf.DNSNames {
		if slices.Contains(names, name) {
			return nil
		}
	}
	return fmt.Errorf("the client certificate names %v; the provider answers only %v", leaf.DNSNames, names)
}

// followClientCA reads the client CA now and every ClientCARefresh into
// pool, until ctx ends; a read that fails keeps the last pool.
func (s *Server) followClientCA(ctx context.Context, pool *atomic.Pointer[x509.CertPool]) {
	refresh := s.ClientCARefresh
	if refresh <= 0 {
		refresh = 30 * time.Second
	}
	for {
		if p, err := s.readClientCA(ctx); err != nil {
			s.Log.Error(err, "reading the client CA; the provider keeps the one it has", "has", pool.Load() != nil)
		} else {
			pool.Store(p)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(refresh):
		}
	}
}

func (s *Server) readClientCA(ctx context.Context) (*x509.CertPool, error) {
	pem, err := s.ClientCA(ctx)
	if err != nil {
		return nil, fmt.Errorf("external data provider: client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("external data provider: the client CA holds no PEM certificate")
	}
	return pool, nil
}

// ClientCAFile reads the client CA from a file.
func ClientCAFile(path string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) { return os.ReadFile(path) }
}

// ClientCAWebhook reads the client CA from the CA bundles of a
// ValidatingWebhookConfiguration: Gatekeeper's rotator writes its CA into
// every webhook of gatekeeper-validating-webhook-configuration. Reading it
// needs no access to Gatekeeper's Secret, which holds the CA's private key
// too.
func ClientCAWebhook(reader client.Reader, name string) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		config := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := reader.Get(ctx, types.NamespacedName{Name: name}, config); err != nil {
			return nil, fmt.Errorf("ValidatingWebhookConfiguration %s: %w", name, err)
		}
		var bundles []byte
		for _, w := range config.Webhooks {
			if len(w.ClientConfig.CABundle) > 0 && !bytes.Contains(bundles, w.ClientConfig.CABundle) {
				bundles = append(bundles, w.ClientConfig.CABundle...)
				bundles = append(bundles, '\n')
			}
		}
		if len(bundles) == 0 {
			return nil, fmt.Errorf("ValidatingWebhookConfiguration %s holds no CA bundle yet", name)
		}
		return bundles, nil
	}
}

// ClientCASecretKey is the key of a Secret that holds a CA, as Gatekeeper's
// certificate rotator writes its gatekeeper-webhook-server-cert.
const ClientCASecretKey = "ca.crt"

// ClientCASecret reads the client CA from key ca.crt of a Secret.
func ClientCASecret(reader client.Reader, key types.NamespacedName) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		secret := &corev1.Secret{}
		if err := reader.Get(ctx, key, secret); err != nil {
			return nil, fmt.Errorf("secret %s: %w", key, err)
		}
		pem, ok := secret.Data[ClientCASecretKey]
		if !ok {
			return nil, fmt.Errorf("secret %s has no %s", key, ClientCASecretKey)
		}
		return pem, nil
	}
}
