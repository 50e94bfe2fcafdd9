package e2e_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// The model's trail for a lowered grant (docs/design/model.md, "A lowered
// grant"), on the real processes: an object admitted under a grant of 3, the
// grant lowered to 1 and recorded on the bucket by the manager, and then a
// create decided by a Gatekeeper replica whose grant cache has not seen the
// change (its ResourceGrant watch held back by a proxy in front of the API
// server). The replica is held to the limit the bucket records: denied. (It
// restarts processes, so it runs with the sequential tests.)
func TestALoweredGrantBindsAReplicaWhoseCacheHasNotSeenIt(t *testing.T) {
	skipInStockMode(t, "the manager's provider decides, from the grant cache the bucket's limit comes from")
	const ns, rt = "e2e-stale-grant", "e2e.quota/stale-grant-configmaps"
	ctx := context.Background()
	namespace(t, ns, nil)
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	grant(t, "configmaps", consumer, rt, 3)
	quotaEntity(t, "e2e-stale-grant", []string{ns}, map[string]any{"resourceType": rt})
	mustAdmit(t, ns, "cm-1")

	// Only replica 0 answers (the balancer skips replicas that refuse), and
	// it reaches the API server through the proxy.
	proxy := startWatchHoldingProxy(t, cluster.GatekeeperKubeconfig, "/resourcegrants")
	gk, others := cluster.Gatekeepers[0], cluster.Gatekeepers[1:]
	args := slices.Clone(gk.Args)
	t.Cleanup(func() {
		proxy.release()
		gk.Stop()
		gk.Args = args
		for _, p := range slices.Concat(others, cluster.Gatekeepers[:1]) {
			if err := cluster.Restart(ctx, p); err != nil {
				t.Error(err)
			}
		}
	})
	for _, p := range others {
		p.Kill()
	}
	gk.Stop()
	gk.Args = slices.Clone(args)
	for i, a := range gk.Args {
		if strings.HasPrefix(a, "--kubeconfig=") {
			gk.Args[i] = "--kubeconfig=" + proxy.kubeconfig
		}
	}
	if err := cluster.Restart(ctx, gk); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, "replica 0 admits through the proxy", func() error {
		if err := createConfigMap(ns, "cm-2"); err != nil && !apierrors.IsAlreadyExists(err) {
			return err // not ready yet: it fails closed
		}
		return nil
	})

	// Its grant watch held, the grant is lowered to 1; the manager, whose
	// cache has it, records it on the bucket.
	proxy.hold()
	g := &quotav1alpha1.ResourceGrant{}
	key := client.ObjectKey{Namespace: quotav1alpha1.BucketNamespace(consumer, quotav1alpha1.DefaultSystemNamespace), Name: "configmaps"}
	if err := cluster.Client.Get(ctx, key, g); err != nil {
		t.Fatal(err)
	}
	g.Spec.Allowances[0].Buckets[0].Amount = 1
	if err := cluster.Client.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the bucket records the lowered limit", func() error {
		if st := bucket(t, consumer, rt); st.Limit != 1 {
			return fmt.Errorf("limit %d", st.Limit)
		}
		return nil
	})
	if held := proxy.heldEvents(); held == 0 {
		t.Fatal("the proxy held no ResourceGrant watch: replica 0's cache may have the lowered grant, and the test would prove nothing")
	}
	// Replica 0's cache still says 3, with 2 live: before the fence it
	// admitted this one against the old limit.
	mustDeny(t, ns, "cm-3", "available 0 of 1")
}

// watchHoldingProxy is a TLS reverse proxy to the API server for one
// process: the process's kubeconfig points at it with no credentials, and
// the proxy authenticates as the process (the credentials of the kubeconfig
// it was made from). While held, it passes no bytes of the process's
// watches whose path contains a given resource: its informer sees nothing
// of them, as a replica whose watch lags.
type watchHoldingProxy struct {
	kubeconfig string
	resource   string

	mu     sync.Mutex
	cond   *sync.Cond
	held   bool
	events int // watch reads held back
}

func startWatchHoldingProxy(t *testing.T, kubeconfig, resource string) *watchHoldingProxy {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := &watchHoldingProxy{resource: resource}
	p.cond = sync.NewCond(&p.mu)
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1, // watch events as they come
		ModifyResponse: func(resp *http.Response) error {
			if req := resp.Request; req.URL.Query().Get("watch") == "true" && strings.Contains(req.URL.Path, p.resource) {
				resp.Body = &heldBody{ReadCloser: resp.Body, p: p}
			}
			return nil
		},
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(cluster.CertDir(), "tls.crt"), filepath.Join(cluster.CertDir(), "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { p.release(); _ = srv.Close() })

	out := clientcmdapi.NewConfig()
	out.Clusters["bed"] = &clientcmdapi.Cluster{Server: "https://" + ln.Addr().(*net.TCPAddr).String(), CertificateAuthorityData: cluster.CAData()}
	out.AuthInfos["proxied"] = &clientcmdapi.AuthInfo{}
	out.Contexts["bed"] = &clientcmdapi.Context{Cluster: "bed", AuthInfo: "proxied"}
	out.CurrentContext = "bed"
	p.kubeconfig = filepath.Join(t.TempDir(), "proxied.kubeconfig")
	if err := clientcmd.WriteToFile(*out, p.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *watchHoldingProxy) hold() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

func (p *watchHoldingProxy) release() {
	p.mu.Lock()
	p.held = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// heldEvents is how many watch reads found the proxy holding.
func (p *watchHoldingProxy) heldEvents() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.events
}

// heldBody is a watch's response body that passes nothing while its proxy
// holds: a read that has bytes waits, undelivered, until released.
type heldBody struct {
	io.ReadCloser
	p *watchHoldingProxy
}

func (b *heldBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	b.p.mu.Lock()
	if b.p.held && n > 0 {
		b.p.events++
	}
	for b.p.held {
		b.p.cond.Wait()
	}
	b.p.mu.Unlock()
	return n, err
}
