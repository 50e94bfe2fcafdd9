package externaldata

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
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
	// Log reports a client CA that cannot be read; default: discarded.
	Log logr.Logger
}

// NeedLeaderElection is false: every replica answers.
func (*Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
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
		config.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := config.Clone()
			c.GetConfigForClient = nil
			if c.ClientCAs = pool.Load(); c.ClientCAs == nil {
				c.ClientCAs = x509.NewCertPool() // not read yet: nobody verifies
			}
			return c, nil
		}
		handler.RequireClientCertificate = true
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
