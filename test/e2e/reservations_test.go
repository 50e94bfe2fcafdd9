package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

const denyLaterLabel = "e2e.quota/deny-later"

// configMapCreates is the webhook rule for creates of ConfigMaps.
var configMapCreates = admissionregistrationv1.RuleWithOperations{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
	Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
}

// denyLater is a second validating webhook, for requests in namespace that
// rule matches, that denies the objects labelled denyLaterLabel=true after
// Gatekeeper has allowed them (validating webhooks run in parallel, so
// Gatekeeper has reserved by then): the object, or its update, never
// appears.
func denyLater(t *testing.T, namespace string, rule admissionregistrationv1.RuleWithOperations) {
	t.Helper()
	laterWebhook(t, "deny-later", namespace, rule, func(_ context.Context, obj metav1.PartialObjectMetadata) *admissionv1.AdmissionResponse {
		if obj.Labels[denyLaterLabel] != "true" {
			return &admissionv1.AdmissionResponse{Allowed: true}
		}
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: "denied later in the admission chain", Code: http.StatusForbidden}}
	})
}

// webhookProbeLabel marks the dry-run ConfigMaps laterWebhook creates to see
// its webhook called.
const webhookProbeLabel = "e2e.quota/webhook-probe"

// laterWebhook serves a second validating webhook (Fail, 30 s timeout) for
// requests in namespace that rule matches, answering each with answer, which
// sees the request's object and a context that ends with the API server's
// request. It returns once the API server calls it: the API server loads
// webhook configurations asynchronously, and a request sent at once may pass
// before (under load, a held update was stored at once). Its configuration
// carries a probe webhook for dry-run creates of ConfigMaps labelled
// webhookProbeLabel; the API server loads a configuration's webhooks
// together, so once it calls the probe, it calls the first too. The
// webhook's configuration goes with the test.
func laterWebhook(t *testing.T, name, namespace string, rule admissionregistrationv1.RuleWithOperations, answer func(context.Context, metav1.PartialObjectMetadata) *admissionv1.AdmissionResponse) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/"+name, func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var obj metav1.PartialObjectMetadata
		_ = json.Unmarshal(review.Request.Object.Raw, &obj)
		resp := answer(r.Context(), obj)
		resp.UID = review.Request.UID
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(review)
	})
	probed := make(chan struct{})
	var probedOnce sync.Once
	mux.HandleFunc("/probe", func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		probedOnce.Do(func() { close(probed) })
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	})
	srv := &http.Server{Handler: mux}
	go func() {
		err := srv.ServeTLS(l, filepath.Join(cluster.CertDir(), "tls.crt"), filepath.Join(cluster.CertDir(), "tls.key"))
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { _ = srv.Close() })

	url := "https://" + l.Addr().String() + "/" + name
	probeURL := "https://" + l.Addr().String() + "/probe"
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(30)
	inNamespace := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace}}
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + name + "-" + namespace},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    name + ".e2e.quota",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: cluster.CAData()},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			NamespaceSelector:       inNamespace,
			Rules:                   []admissionregistrationv1.RuleWithOperations{rule},
		}, {
			Name:                    name + "-probe.e2e.quota",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &probeURL, CABundle: cluster.CAData()},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			NamespaceSelector:       inNamespace,
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{webhookProbeLabel: "true"}},
			Rules:                   []admissionregistrationv1.RuleWithOperations{configMapCreates},
		}},
	}
	create(t, config)
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), config) })
	// Validating webhooks are called side by side, so the probe is called
	// even when another webhook (quota) refuses the dry run.
	testenv.Eventually(t, time.Minute, "webhook "+config.Name+" called by the API server", func() error {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			GenerateName: "webhook-probe-", Namespace: namespace, Labels: map[string]string{webhookProbeLabel: "true"}}}
		err := cluster.Client.Create(context.Background(), probe, client.DryRunAll)
		select {
		case <-probed:
			return nil
		default:
		}
		if err != nil {
			return fmt.Errorf("not called yet; the dry-run create: %w", err)
		}
		return errors.New("not called yet")
	})
}

// A reservation whose object never appears expires and returns its amount;
// server-side dry runs and audit consume nothing.
func TestReservationsExpireAndDryRunConsumesNothing(t *testing.T) {
	t.Parallel()
	const ns, rt = "e2e-reserve", "e2e.quota/reserve-configmaps"
	namespace(t, ns, nil)
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	grant(t, "configmaps", consumer, rt, 2)
	quotaEntity(t, "e2e-reserve", []string{ns}, map[string]any{"resourceType": rt})
	denyLater(t, ns, configMapCreates)

	// Wait until the second webhook is in the chain.
	testenv.Eventually(t, time.Minute, "deny-later webhook serving", func() error {
		err := cluster.Client.Create(context.Background(),
			configMap(ns, "probe", map[string]string{denyLaterLabel: "true"}), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "denied later") {
			return errors.New("not yet")
		}
		return nil
	})

	err := cluster.Client.Create(context.Background(), configMap(ns, "never", map[string]string{denyLaterLabel: "true"}))
	if err == nil || !strings.Contains(err.Error(), "denied later in the admission chain") {
		t.Fatalf("want the second webhook's denial, got %v", err)
	}
	// Gatekeeper reserved for it; the reservation holds quota until it expires.
	st := bucket(t, consumer, rt)
	if st.Reserved != 1 || st.Allocated != 0 || len(st.Reservations) != 1 || st.Reservations[0].Object.Name != "never" {
		t.Fatalf("after the later denial: allocated %d reserved %d reservations %+v", st.Allocated, st.Reserved, st.Reservations)
	}
	// It expires after the TTL, and nothing leaks.
	testenv.Eventually(t, reservationTTL+45*time.Second, "reservation expired", func() error {
		if st := bucket(t, consumer, rt); st.Reserved != 0 || st.Allocated != 0 {
			return errors.New("still held")
		}
		return nil
	})

	// Server-side dry runs are judged but reserve nothing.
	for range 3 {
		if err := createConfigMap(ns, "dry", client.DryRunAll); err != nil {
			t.Fatalf("dry run denied with quota free: %v", err)
		}
	}
	mustAdmit(t, ns, "real-1")
	mustAdmit(t, ns, "real-2")
	// A dry run past the limit is denied with the message the real request would get.
	err = createConfigMap(ns, "dry-over", client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "available 0 of 2") {
		t.Fatalf("dry run past the limit: %v", err)
	}
	waitBucket(t, consumer, rt, 2, 0)

	// Audit (every 5s) reviews the existing objects and reserves nothing:
	// wait for an audit that started after both objects existed.
	waitAudit(t, "QuotaEntity", "e2e-reserve", time.Now())
	if st := bucket(t, consumer, rt); st.Allocated != 2 || st.Reserved != 0 {
		t.Fatalf("after audit: allocated %d reserved %d", st.Allocated, st.Reserved)
	}
}

// waitAudit waits until Gatekeeper's audit of a constraint has run after since.
func waitAudit(t *testing.T, kind, name string, since time.Time) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "an audit of "+name, func() error {
		c := &unstructured.Unstructured{}
		c.SetAPIVersion("constraints.gatekeeper.sh/v1beta1")
		c.SetKind(kind)
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: name}, c); err != nil {
			return err
		}
		ts, _, _ := unstructured.NestedString(c.Object, "status", "auditTimestamp")
		at, err := time.Parse(time.RFC3339, ts)
		if err != nil || !at.After(since) {
			return fmt.Errorf("last audit %q", ts)
		}
		return nil
	})
}
