package builtins_test

import (
	"context"
	"math"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

func TestObserveModeRecordsClaimsAndTouchesNoLedger(t *testing.T) {
	l := useLedger(t, ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: 1})
	rec := &builtins.Recorder{}
	ctx := builtins.WithRecorder(context.Background(), rec)
	query := map[string]any{"consumer": map[string]any{"kind": "Namespace", "name": "team-a"}, "resourceType": "core/pods"}
	rs, err := rego.New(
		rego.Query("d := quota.reserve(input.claim); u := quota.usage(input.query)"),
		rego.Input(map[string]any{"claim": claim("c1", pods(teamA, 3), pods(teamA, 2)), "query": query}),
	).Eval(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("%d results, want 1", len(rs))
	}
	d := rs[0].Bindings["d"].(map[string]any)
	assertEqual(t, "granted", d["granted"], true)
	reqs := d["requests"].([]any)
	assertEqual(t, "merged requests", len(reqs), 1)
	assertEqual(t, "merged amount", reqs[0].(map[string]any)["amount"], jsonNumber(5))
	max := jsonNumber(int64(math.MaxInt64))
	assertEqual(t, "usage", rs[0].Bindings["u"], map[string]any{
		"bucket": bucket(teamA), "limit": max, "allocated": jsonNumber(0), "reserved": jsonNumber(0), "available": max,
	})
	assertEqual(t, "recorded", rec.Claims, []builtins.RecordedClaim{{Claim: ledger.Claim{
		ID:     "c1",
		Object: ledger.ObjectRef{Kind: "Pod", Namespace: "team-a", Name: "p-c1", UID: "c1"},
		Requests: []ledger.Request{
			{Consumer: teamA, ResourceType: "core/pods", Amount: 3},
			{Consumer: teamA, ResourceType: "core/pods", Amount: 2},
		},
	}}})
	assertEqual(t, "ledger untouched", usageOf(t, l, teamA), ledger.Usage{Limit: 1, Available: 1})
}

// The claim's metadata travels with the recorded claim, for the observer's
// view; the decision and the ledger do not depend on it.
func TestObserveModeRecordsTheClaimMetadata(t *testing.T) {
	l := useLedger(t, ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: 1})
	rec := &builtins.Recorder{}
	ctx := builtins.WithRecorder(context.Background(), rec)
	c := claim("c1", pods(teamA, 1))
	c["metadata"] = map[string]any{
		"name": "web-pods", "generateName": "web-", "namespace": "team-a",
		"labels":      map[string]any{"app": "web"},
		"annotations": map[string]any{"example.com/note": "any text, even spaces"},
	}
	rs, err := rego.New(rego.Query("d := quota.reserve(input)"), rego.Input(c)).Eval(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, "granted", rs[0].Bindings["d"].(map[string]any)["granted"], true)
	assertEqual(t, "recorded metadata", rec.Claims[0].Metadata, builtins.ClaimMetadata{View: true,
		Name: "web-pods", GenerateName: "web-", Namespace: "team-a",
		Labels:      map[string]string{"app": "web"},
		Annotations: map[string]string{"example.com/note": "any text, even spaces"},
	})
	assertEqual(t, "ledger untouched", usageOf(t, l, teamA), ledger.Usage{Limit: 1, Available: 1})
}

// At admission the metadata changes nothing the ledger decides or holds.
func TestReserveIgnoresTheClaimMetadata(t *testing.T) {
	l := useLedger(t, ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: 2})
	c := claim("c1", pods(teamA, 1))
	c["metadata"] = map[string]any{"name": "web-pods", "labels": map[string]any{"app": "web"}}
	assertEqual(t, "granted", mustEval(t, "quota.reserve(input).granted", c), true)
	assertEqual(t, "usage", usageOf(t, l, teamA), ledger.Usage{Limit: 2, Reserved: 1, Available: 1})
}
