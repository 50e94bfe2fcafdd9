package builtins_test

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// evalIn is eval under ctx, as Gatekeeper's review evaluates under its
// request's context.
func evalIn(t *testing.T, ctx context.Context, call string, input any) any {
	t.Helper()
	rs, err := rego.New(rego.Query("x := "+call), rego.Input(input)).Eval(ctx)
	if err != nil {
		t.Fatalf("%s: %v", call, err)
	}
	if len(rs) != 1 {
		t.Fatalf("%s: %d results, want 1", call, len(rs))
	}
	return rs[0].Bindings["x"]
}

// A review's granted calls are recorded, its replays and denials are not,
// and Release gives back exactly what it took: an earlier review's
// reservation of the same claim stays.
func TestReleaseGivesBackWhatTheReviewReserved(t *testing.T) {
	l := useLedger(t,
		ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: 4},
		ledger.Grant{ID: "o", Consumer: acme, ResourceType: "core/pods", Amount: 10})
	// An earlier review (admitted) holds "earlier" in team-a.
	mustEval(t, "quota.reserve(input)", claim("earlier", pods(teamA, 1)))

	var rs builtins.Reservations
	ctx := builtins.WithReservations(context.Background(), &rs)
	for _, c := range []map[string]any{
		claim("c1", pods(teamA, 1), pods(acme, 1)), // granted: recorded
		claim("c2", pods(acme, 2)),                 // granted: recorded
		claim("earlier", pods(teamA, 1)),           // a replay: nothing added
		claim("c3", pods(teamA, 5)),                // denied: rolled back already
	} {
		evalIn(t, ctx, "quota.reserve(input)", c)
	}
	if got := rs.Len(); got != 2 {
		t.Fatalf("%d calls recorded, want 2 (c1 and c2)", got)
	}
	assertEqual(t, "team-a during the review", usageOf(t, l, teamA), ledger.Usage{Limit: 4, Reserved: 2, Available: 2})
	assertEqual(t, "acme during the review", usageOf(t, l, acme), ledger.Usage{Limit: 10, Reserved: 3, Available: 7})

	if err := rs.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rs.Len(); got != 0 {
		t.Fatalf("%d calls left after Release, want 0", got)
	}
	assertEqual(t, "team-a after the release", usageOf(t, l, teamA), ledger.Usage{Limit: 4, Reserved: 1, Available: 3})
	assertEqual(t, "acme after the release", usageOf(t, l, acme), ledger.Usage{Limit: 10, Reserved: 0, Available: 10})
}

// An evaluation in observe mode reserves nothing, so records nothing.
func TestObservingRecordsNoReservations(t *testing.T) {
	l := useLedger(t, ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: 4})
	var rs builtins.Reservations
	ctx := builtins.WithRecorder(builtins.WithReservations(context.Background(), &rs), &builtins.Recorder{})
	evalIn(t, ctx, "quota.reserve(input)", claim("c1", pods(teamA, 1)))
	if got := rs.Len(); got != 0 {
		t.Fatalf("%d calls recorded in observe mode, want 0", got)
	}
	assertEqual(t, "team-a", usageOf(t, l, teamA), ledger.Usage{Limit: 4, Available: 4})
}
