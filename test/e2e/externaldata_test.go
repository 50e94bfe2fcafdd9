package e2e_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/frameworks/constraint/pkg/apis/externaldata/unversioned"
	frameworks "github.com/open-policy-agent/frameworks/constraint/pkg/externaldata"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/counted"
	"github.com/quotakeeper/quotakeeper/internal/externaldata"
	quotarego "github.com/quotakeeper/quotakeeper/rego"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// What only the stock mode has: the External Data provider, which can be
// down or slow on its own. (The rest of the suite runs in both modes.)

// skipUnlessStockMode skips a test of the External Data provider when the
// suite runs Gatekeeper with the plugin, which has none.
func skipUnlessStockMode(t *testing.T) {
	t.Helper()
	if !stockMode {
		t.Skip("builtin mode: no External Data provider (" + AdmissionEnv + "=externalData runs it)")
	}
}

// A provider that is down denies every create a quota constraint matches,
// in plain words (fail closed, never the silent allow of an unchecked
// system_error), reserves nothing, and admission resumes once it is back.
// Every constraint that asks the provider says so: in the suite, the
// QuotaClaimPolicy constraints of earlier tests' ClaimCreationPolicies
// match every ConfigMap, and only the provider can tell that their CEL
// condition leaves this one out (docs/operations.md, "What the stock mode
// gives up").
func TestProviderDownDeniesInPlainWords(t *testing.T) {
	skipUnlessStockMode(t)
	const ns, rt, name = "e2e-provider-down", "e2e.quota/provider-down-configmaps", "e2e-provider-down"
	namespace(t, ns, nil)
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	grant(t, "configmaps", consumer, rt, 5)
	quotaEntity(t, name, []string{ns}, map[string]any{"resourceType": rt})
	mustAdmit(t, ns, "cm-1")
	waitBucket(t, consumer, rt, 1, 0)

	cluster.Manager.Stop()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = cluster.Restart(context.Background(), cluster.Manager)
		}
	})
	undecided := fmt.Sprintf(`] quota cannot decide: quotakeeper's External Data provider did not answer (failed to send external data request: Post "https://%s/v1/quota": `,
		cluster.ExternalDataAddr())
	const suffix = "); the request is denied and nothing was reserved. Retry in a minute; if it keeps failing, tell your platform team (docs/troubleshooting.md#quota-cannot-decide)"
	const denied = `admission webhook "validation.gatekeeper.sh" denied the request: `
	err := createConfigMap(ns, "cm-2")
	if err == nil || !strings.HasPrefix(err.Error(), denied) {
		t.Fatalf("cm-2 with the provider down: got %v, want Gatekeeper's denial", err)
	}
	// One violation a line, each "[constraint] " and the plain words.
	ours := false
	for line := range strings.SplitSeq(strings.TrimPrefix(err.Error(), denied), "\n") {
		line = strings.TrimSpace(line)
		constraint, rest, ok := strings.Cut(strings.TrimPrefix(line, "["), "]")
		if !strings.HasPrefix(line, "[") || !ok || !strings.HasPrefix("]"+rest, undecided) || !strings.HasSuffix(rest, suffix) {
			t.Fatalf("cm-2 with the provider down: a violation that is not the plain words %q...%q: %q", undecided, suffix, line)
		}
		ours = ours || constraint == name
	}
	if !ours {
		t.Fatalf("cm-2 with the provider down: no violation of %s in %v", name, err)
	}

	if err := cluster.Restart(context.Background(), cluster.Manager); err != nil {
		t.Fatal(err)
	}
	restarted = true
	testenv.Eventually(t, time.Minute, "cm-2 admitted once the provider is back", func() error {
		return createConfigMap(ns, "cm-2")
	})
	waitBucket(t, consumer, rt, 2, 0)
}

// The provider answers a quota.reserve within Gatekeeper's timeout for it
// (the Provider's spec.timeout, 5 s): 200 reservations, 4 at a time, on a
// real bucket, as Gatekeeper sends them (the frameworks' client, TLS with
// the Provider's CA bundle). It logs the latencies; make load
// GATEKEEPER=stock measures the p99 under load.
func TestProviderAnswersWithinItsTimeout(t *testing.T) {
	skipUnlessStockMode(t)
	const ns, rt, name = "e2e-provider-latency", "e2e.quota/provider-latency-configmaps", "e2e-provider-latency"
	const calls, concurrency = 200, 4
	namespace(t, ns, nil)
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	grant(t, "configmaps", consumer, rt, calls)
	quotaEntity(t, name, []string{ns}, map[string]any{"resourceType": rt})
	ctx := context.Background()
	provider := installedProvider(t)
	version := policyVersion(t, name)
	// Gatekeeper's client certificate, as Gatekeeper presents it (mTLS).
	gatekeeperCert, err := tls.LoadX509KeyPair(filepath.Join(cluster.CertDir(), "tls.crt"), filepath.Join(cluster.CertDir(), "tls.key"))
	if err != nil {
		t.Fatal(err)
	}

	latencies := make([]time.Duration, calls)
	errs := make(chan error, calls)
	var wg sync.WaitGroup
	next := make(chan int)
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				uid := fmt.Sprintf("latency-%d", i)
				claim := map[string]any{
					"id":            uid,
					"object":        map[string]any{"apiGroup": "", "kind": "ConfigMap", "namespace": ns, "name": uid, "uid": uid},
					"requests":      []any{map[string]any{"consumer": map[string]any{"apiGroup": "", "kind": "Namespace", "name": ns, "namespace": ""}, "resourceType": rt, "amount": 1, "dimensions": map[string]any{}}},
					"policyVersion": version,
				}
				key, err := json.Marshal(externaldata.Key{Builtin: "quota.reserve", Args: []any{claim}, Request: "req-" + uid})
				if err != nil {
					errs <- err
					continue
				}
				start := time.Now()
				resp, _, err := frameworks.DefaultSendRequestToProvider(ctx, provider, []string{string(key)}, &gatekeeperCert)
				latencies[i] = time.Since(start)
				switch {
				case err != nil:
					errs <- err
				case len(resp.Response.Items) != 1 || resp.Response.Items[0].Error != "":
					errs <- fmt.Errorf("call %d: %+v", i, resp.Response)
				default:
					if d, _ := resp.Response.Items[0].Value.(map[string]any); d["granted"] != true {
						errs <- fmt.Errorf("call %d not granted: %v", i, d)
					}
				}
			}
		})
	}
	for i := range calls {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	slices.Sort(latencies)
	p50, p99, maxL := latencies[calls/2], latencies[calls*99/100-1], latencies[calls-1]
	t.Logf("provider quota.reserve latency over %d calls, %d at a time: p50 %s, p99 %s, max %s", calls, concurrency, p50, p99, maxL)
	if timeout := time.Duration(provider.Spec.Timeout) * time.Second; p99 >= timeout {
		t.Errorf("p99 %s is not within the Provider's timeout %s", p99, timeout)
	}
	if st := bucket(t, consumer, rt); st.Reserved != calls {
		t.Errorf("reserved %d after %d granted reservations", st.Reserved, calls)
	}
}

// The provider answers only Gatekeeper (the chart's
// externalData.clientCASecret: the CA in Gatekeeper's
// gatekeeper-webhook-server-cert Secret): a client that trusts the
// manager's certificate but presents none of Gatekeeper's is refused at the
// handshake. (Every other test of this mode is a call Gatekeeper made with
// its certificate.)
func TestProviderAnswersOnlyGatekeeper(t *testing.T) {
	skipUnlessStockMode(t)
	t.Parallel()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(cluster.CAData())
	stranger := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}}}
	body, err := json.Marshal(frameworks.NewProviderRequest([]string{`{"builtin": "quota.quantity", "args": ["2", ""], "request": ""}`}))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := stranger.Post("https://"+cluster.ExternalDataAddr()+externaldata.Path, "application/json", bytes.NewReader(body))
	if err == nil {
		_ = resp.Body.Close()
		t.Fatalf("a client without Gatekeeper's certificate was answered: %s", resp.Status)
	}
	if !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("a client without Gatekeeper's certificate: %v\nwant the handshake refused for want of a certificate", err)
	}
}

// installedProvider is Gatekeeper's Provider of the quotakeeper provider,
// as installed (read unstructured: the client's scheme lacks the kind).
func installedProvider(t *testing.T) *unversioned.Provider {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "externaldata.gatekeeper.sh", Version: "v1beta1", Kind: "Provider"})
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: quotarego.ExternalDataProvider}, u); err != nil {
		t.Fatal(err)
	}
	p := &unversioned.Provider{ObjectMeta: metav1.ObjectMeta{Name: u.GetName()}}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object["spec"].(map[string]any), &p.Spec); err != nil {
		t.Fatal(err)
	}
	return p
}

// policyVersion is the version the manager stamped into the QuotaEntity's
// parameters, which a claim carries (package counted).
func policyVersion(t *testing.T, name string) string {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(constraintGVK("QuotaEntity"))
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: name}, u); err != nil {
		t.Fatal(err)
	}
	v, _, _ := unstructured.NestedString(u.Object, "spec", "parameters", counted.Field)
	if v == "" {
		t.Fatalf("constraint %s has no parameters.%s", name, counted.Field)
	}
	return v
}
