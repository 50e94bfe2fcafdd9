package plugin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

var teamA = ledger.Consumer{Kind: "Namespace", Name: "team-a"}

// TestMain registers the builtins with no process Env: each review here
// carries its own (builtins.WithEnv).
func TestMain(m *testing.M) {
	if err := builtins.Register(nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// reviewer stands in for Gatekeeper's validation handler: it evaluates
// quota.reserve for each claim under the request's context, as the rego
// driver does, then answers resp.
type reviewer struct {
	t      *testing.T
	claims []map[string]any
	resp   admission.Response
}

func (r reviewer) Handle(ctx context.Context, _ admission.Request) admission.Response {
	for _, c := range r.claims {
		rs, err := rego.New(rego.Query("x := quota.reserve(input)"), rego.Input(c)).Eval(ctx)
		if err != nil || len(rs) != 1 {
			r.t.Fatalf("quota.reserve(%v): %v, %d results", c["id"], err, len(rs))
		}
	}
	return r.resp
}

func configMapClaim(id string, amount int64) map[string]any {
	return map[string]any{
		"id":     id,
		"object": map[string]any{"apiGroup": "", "kind": "ConfigMap", "namespace": "team-a", "name": "cm-" + id, "uid": id},
		"requests": []any{map[string]any{
			"consumer":     map[string]any{"kind": teamA.Kind, "name": teamA.Name},
			"resourceType": "core/configmaps",
			"amount":       amount,
		}},
	}
}

// failingStore fails every write once failing is set.
type failingStore struct {
	ledger.Store
	failing bool
}

func (s *failingStore) Apply(ctx context.Context, key ledger.BucketKey, mutate func(*ledger.Bucket) error) (ledger.Bucket, error) {
	if s.failing {
		return ledger.Bucket{}, errors.New("apiserver unavailable")
	}
	return s.Store.Apply(ctx, key, mutate)
}

func denied(msg string) admission.Response {
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed: false, Result: &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: msg}}}
}

// A review that ends in a denial gives back at once what its quota.reserve
// calls added (never an earlier request's reservation); one that admits,
// with or without a warn constraint's warning, keeps it; a failed release
// leaves the reservation to expire and the response as it was.
func TestReleaseOnDenial(t *testing.T) {
	now := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	const otherDenial = "[labels] add a team label"
	const quotaMsg = "quota exceeded for Namespace team-a: requested 1 of core/configmaps, available 0 of 3 (allocated 0, reserved 3)"
	ended := quotav1alpha1.QuotaBypass{ObjectMeta: metav1.ObjectMeta{Name: "ended", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec:   quotav1alpha1.QuotaBypassSpec{Reason: "INC-42", Duration: metav1.Duration{Duration: 10 * time.Minute}},
		Status: quotav1alpha1.QuotaBypassStatus{Relaxed: []quotav1alpha1.RelaxedConstraint{{Kind: "QuotaEntity", Name: "cms", EnforcementAction: "deny"}}}}
	for _, c := range []struct {
		name         string
		resp         admission.Response
		bypasses     bypassList
		storeFails   bool
		wantAllowed  bool
		wantReserved int64 // after the request; "earlier" holds 1 throughout
	}{
		{name: "another constraint denies", resp: denied(otherDenial), wantReserved: 1},
		{name: "admitted", resp: admission.Allowed(""), wantAllowed: true, wantReserved: 3},
		{name: "a warn constraint only warns", resp: admission.Allowed("").WithWarnings("[labels] add a team label"), wantAllowed: true, wantReserved: 3},
		{name: "the review errs", resp: admission.Errored(http.StatusInternalServerError, errors.New("error reviewing resultant resource")), wantReserved: 1},
		{name: "an ended bypass turns the admission into a denial", resp: admission.Allowed("").WithWarnings("[cms] " + quotaMsg),
			bypasses: bypassList{ended}, wantReserved: 1},
		{name: "the release fails", resp: denied(otherDenial), storeFails: true, wantReserved: 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			grants := ledger.NewGrantSet()
			if err := grants.Set(ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/configmaps", Amount: 3}); err != nil {
				t.Fatal(err)
			}
			store := &failingStore{Store: ledger.NewMemoryStore()}
			l := ledger.New(store, grants)
			key := ledger.NewBucketKey(teamA, "core/configmaps", nil)
			// An earlier request, admitted, holds "earlier": this one
			// replays it (an UPDATE's id repeats), and must never
			// release it.
			if _, err := l.Reserve(context.Background(), ledger.Claim{ID: "earlier", Requests: []ledger.Request{{Consumer: teamA, ResourceType: "core/configmaps", Amount: 1}}}); err != nil {
				t.Fatal(err)
			}
			inner := reviewer{t: t, claims: []map[string]any{configMapClaim("earlier", 1), configMapClaim("a", 1), configMapClaim("b", 1)}, resp: c.resp}
			var h admission.Handler = inner
			if c.bypasses != nil {
				h = &BypassAuditor{Handler: inner, Reader: c.bypasses, Now: func() time.Time { return now }}
			}
			// The API server has stopped waiting: the release happens all
			// the same.
			ctx, cancel := context.WithCancel(builtins.WithEnv(context.Background(), &builtins.Env{Ledger: l}))
			wrapped := &ReleaseOnDenial{Handler: admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
				resp := h.Handle(ctx, req)
				cancel()
				store.failing = c.storeFails
				return resp
			})}
			resp := wrapped.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "req-1", Operation: admissionv1.Create, Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: "team-a", Name: "cm-a"}})
			if resp.Allowed != c.wantAllowed {
				t.Fatalf("allowed %t, want %t", resp.Allowed, c.wantAllowed)
			}
			if !c.wantAllowed && resp.Result.Message == "" {
				t.Fatal("the denial lost its message")
			}
			store.failing = false
			u, err := l.Usage(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			if u.Reserved != c.wantReserved {
				t.Fatalf("reserved %d after the request, want %d", u.Reserved, c.wantReserved)
			}
		})
	}
}
