package builtins_test

import (
	"context"
	"math"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/quotakeeper/quotakeeper/builtins"
	"github.com/quotakeeper/quotakeeper/ledger"
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
	assertEqual(t, "recorded", rec.Claims, []ledger.Claim{{
		ID:     "c1",
		Object: ledger.ObjectRef{Kind: "Pod", Namespace: "team-a", Name: "p-c1", UID: "c1"},
		Requests: []ledger.Request{
			{Consumer: teamA, ResourceType: "core/pods", Amount: 3},
			{Consumer: teamA, ResourceType: "core/pods", Amount: 2},
		},
	}})
	assertEqual(t, "ledger untouched", usageOf(t, l, teamA), ledger.Usage{Limit: 1, Available: 1})
}
