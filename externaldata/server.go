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
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/quotakeeper/quotakeeper/builtins"
)

// Server serves the provider over TLS, with the certificate the manager's
// webhooks serve (tls.crt and tls.key in CertDir, re-read when they change,
// as controller-runtime's webhook server does). It is a controller-runtime
// Runnable that every replica runs: each one answers.
type Server struct {
	// Addr is where it listens, host:port.
	Addr string
	// CertDir holds tls.crt and tls.key.
	CertDir string
	// Env is what the builtins decide against (Handler.Env).
	Env func() *builtins.Env
	// ClientCAFile, when set, is the CA that signed Gatekeeper's
	// certificate (Gatekeeper presents it as its client certificate to
	// every provider): a request without a certificate it verifies is
	// refused, at the handshake and again by the handler.
	ClientCAFile string
}

// NeedLeaderElection is false: every replica answers.
func (*Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	watcher, err := certwatcher.New(filepath.Join(s.CertDir, "tls.crt"), filepath.Join(s.CertDir, "tls.key"))
	if err != nil {
		return fmt.Errorf("external data provider: %w", err)
	}
	go func() { _ = watcher.Start(ctx) }()
	config := &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: watcher.GetCertificate}
	handler := Handler{Env: s.Env}
	if s.ClientCAFile != "" {
		pem, err := os.ReadFile(s.ClientCAFile)
		if err != nil {
			return fmt.Errorf("external data provider: client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("external data provider: client CA %s holds no PEM certificate", s.ClientCAFile)
		}
		config.ClientCAs, config.ClientAuth = pool, tls.RequireAndVerifyClientCert
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
