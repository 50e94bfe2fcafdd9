// Package servingcert is the certificate the manager's webhook server and
// External Data provider present, and the readiness that waits for it.
//
// With rotation (the default) the manager issues the certificate itself:
// cert-controller's rotator writes it into a Secret and keeps the CA bundles
// of the webhook configurations (and the Provider), and both servers read it
// from that Secret, through a watch of that one Secret, as soon as it is
// written. They do not read the Secret's volume: the kubelet refreshes a
// Secret volume only at its next sync of the pod, about a minute after the
// rotator's first write, which kept a fresh install's pods unready for about
// 95 s (issue 25; cert-controller's issue 35). A rotated Secret is served the
// moment the watch sees it, for the same reason.
//
// Without rotation, something else (cert-manager) writes the files; the
// servers read them from the certificate directory, re-read when they change
// (controller-runtime's certwatcher), as before.
//
// Either way, each certificate loaded is recorded for the metric
// quotakeeper_serving_certificate_expiration_timestamp_seconds (package
// metrics), whose alert pages before it expires.
//
// It is a package of its own so the manager's main and an envtest suite wire
// the certificate the same way.
package servingcert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/quotakeeper/quotakeeper/internal/metrics"
)

// Options say where the certificate is kept and what it names.
type Options struct {
	// Rotate: the manager issues and rotates the certificate into Secret
	// and serves it from there. Else the servers serve CertDir's files.
	Rotate bool
	// Secret holds the certificate (tls.crt, tls.key, and the CA the
	// rotator keeps); the rotator updates it but never creates it.
	Secret types.NamespacedName
	// Service is the webhook Service, in Secret's namespace: the
	// certificate names <Service>.<namespace>.svc and .svc.cluster.local.
	Service string
	// CertDir is where the Secret is mounted. Without Rotate the servers
	// read their certificate there. With Rotate nothing serves from it,
	// but the rotator still waits for its files to appear (its IsReady, for
	// which nothing here waits) and fails the manager if they never do
	// (after about 9 to 17 minutes), so the volume stays mounted.
	CertDir string
	// Webhooks are the objects whose CA bundle the rotator keeps.
	Webhooks []rotator.WebhookInfo
	// ControllerName names the rotator's controller: default
	// cert-controller's, cert-rotator. Controller names are unique in a
	// process, so a test running two managers names each.
	ControllerName string
}

// Certificate is the serving certificate: TLSOpts for each server that
// presents it, and Add to the manager for the rotator, the Secret's watch
// and the readiness check.
type Certificate struct {
	opts Options
	// current is the last key pair read from the Secret; nil until the
	// rotator has written one.
	current atomic.Pointer[tls.Certificate]
	// secrets watches the one Secret (Rotate only).
	secrets cache.Cache
	log     logr.Logger
}

// New returns the certificate o describes; Add starts what keeps it.
func New(o Options) *Certificate { return &Certificate{opts: o} }

// TLSOpts are the options of a server's tls.Config (controller-runtime's
// webhook.Options.TLSOpts, externaldata.Server.TLSOpts) that present the
// certificate: with Rotate, the Secret's, the server reading no files; none
// without, so the server reads CertDir's itself.
func (c *Certificate) TLSOpts() []func(*tls.Config) {
	if !c.opts.Rotate {
		return nil
	}
	return []func(*tls.Config){func(config *tls.Config) { config.GetCertificate = c.getCertificate }}
}

// Add adds to mgr, with Rotate, the rotator and the watch of its Secret
// (every replica runs both: every replica serves), without, a reader of
// CertDir's certificate for its expiry, and in either case the readiness
// check "webhook": the webhook server answers a TLS handshake, which it
// completes only once it has a certificate to present. Call it before the
// manager starts.
func (c *Certificate) Add(mgr manager.Manager) error {
	if c.opts.Rotate {
		if err := c.addRotation(mgr); err != nil {
			return err
		}
	} else if err := mgr.Add(&certFile{path: filepath.Join(c.opts.CertDir, corev1.TLSCertKey),
		log: mgr.GetLogger().WithName("serving-certificate")}); err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	return mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker())
}

func (c *Certificate) addRotation(mgr manager.Manager) error {
	key, ns := c.opts.Secret, c.opts.Secret.Namespace
	c.log = mgr.GetLogger().WithName("serving-certificate").WithValues("secret", key)
	// A cache of its own: the manager's may not list Secrets (a namespaced
	// Role grants them), and it holds this one Secret.
	secrets, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces:    map[string]cache.Config{ns: {}},
		DefaultFieldSelector: fields.OneTermEqualSelector("metadata.name", key.Name),
	})
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	c.secrets = secrets
	if err := mgr.Add(c); err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	err = rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      key,
		CertDir:        c.opts.CertDir,
		CertName:       corev1.TLSCertKey,
		KeyName:        corev1.TLSPrivateKeyKey,
		CAName:         "quotakeeper-ca",
		CAOrganization: "quotakeeper",
		DNSName:        fmt.Sprintf("%s.%s.svc", c.opts.Service, ns),
		ExtraDNSNames:  []string{fmt.Sprintf("%s.%s.svc.cluster.local", c.opts.Service, ns)},
		// Closed once the volume shows the certificate and the CA bundles
		// hold its CA; nothing waits for it (the servers read the Secret),
		// but the rotator closes it, so it cannot be nil.
		IsReady:        make(chan struct{}),
		Webhooks:       c.opts.Webhooks,
		ControllerName: c.opts.ControllerName,
		// Every replica serves webhooks, so every replica needs the certificate.
		RequireLeaderElection: false,
	})
	if err != nil {
		return fmt.Errorf("certificate rotator: %w", err)
	}
	return nil
}

// NeedLeaderElection is false: every replica serves the certificate.
func (*Certificate) NeedLeaderElection() bool { return false }

// Start watches the Secret (Rotate only), loading each key pair written
// into it, until ctx ends.
func (c *Certificate) Start(ctx context.Context) error {
	if c.secrets == nil {
		return errors.New("serving certificate: started without rotation")
	}
	informer, err := c.secrets.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    c.load,
		UpdateFunc: func(_, obj any) { c.load(obj) },
	}); err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	return c.secrets.Start(ctx)
}

// load makes the Secret's key pair the one presented. A Secret without one
// (empty as the chart ships it, or cleared) keeps the one before, as does
// one that does not parse: a handshake with the last good certificate
// beats none.
func (c *Certificate) load(obj any) {
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	crt, key := secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 && len(key) == 0 {
		return
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		c.log.Error(err, "the Secret holds no usable key pair; presenting the one before", "had", c.current.Load() != nil)
		return
	}
	c.current.Store(&pair)
	c.log.Info("serving the certificate from the Secret", "resourceVersion", secret.ResourceVersion)
	// X509KeyPair parsed the leaf (unless GODEBUG x509keypairleaf=0).
	if pair.Leaf != nil {
		metrics.ServingCertificate(pair.Leaf.NotAfter)
	} else if leaf, err := x509.ParseCertificate(pair.Certificate[0]); err == nil {
		metrics.ServingCertificate(leaf.NotAfter)
	}
}

func (c *Certificate) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if pair := c.current.Load(); pair != nil {
		return pair, nil
	}
	return nil, fmt.Errorf("no serving certificate in Secret %s yet", c.opts.Secret)
}

// certFileInterval is how often certFile reads the certificate again. The
// servers' own watch (controller-runtime's certwatcher) picks a new file up
// sooner; the expiry it reports is judged in days.
const certFileInterval = time.Minute

// certFile records the expiry of the certificate the servers read from
// CertDir without Rotate (issued by something else, such as cert-manager):
// at start and every certFileInterval, on every replica.
type certFile struct {
	path string
	log  logr.Logger
}

// NeedLeaderElection is false: every replica serves the certificate.
func (*certFile) NeedLeaderElection() bool { return false }

// Start records the certificate's expiry until ctx ends. A file that cannot
// be read is logged and read again later; the servers fail on it anyway.
func (f *certFile) Start(ctx context.Context) error {
	var last time.Time
	for {
		notAfter, err := readNotAfter(f.path)
		switch {
		case err != nil:
			f.log.Error(err, "reading the serving certificate's expiry")
		case !notAfter.Equal(last):
			last = notAfter
			f.log.Info("serving the certificate from the certificate directory", "path", f.path, "notAfter", notAfter)
			metrics.ServingCertificate(notAfter)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(certFileInterval):
		}
	}
}

// readNotAfter returns the NotAfter of the first certificate in the PEM
// file at path: the server's own, which a chain file puts first.
func readNotAfter(path string) (time.Time, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, err
	}
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		crt, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s: %w", path, err)
		}
		return crt.NotAfter, nil
	}
	return time.Time{}, fmt.Errorf("%s: no PEM certificate", path)
}
