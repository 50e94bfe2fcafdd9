package builtins_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// meeting holds each of n evaluations at its store until all n have
// reached theirs, so that they are in flight at once.
type meeting struct {
	waiting atomic.Int32
	all     chan struct{}
}

func newMeeting(n int32) *meeting {
	m := &meeting{all: make(chan struct{})}
	m.waiting.Store(n)
	return m
}

var errAlone = errors.New("the other evaluation never reached its store: they did not run side by side")

func (m *meeting) arrive() error {
	if m.waiting.Add(-1) == 0 {
		close(m.all)
	}
	select {
	case <-m.all:
		return nil
	case <-time.After(10 * time.Second):
		return errAlone
	}
}

// meetingStore is a memory store whose first write waits for the meeting.
type meetingStore struct {
	ledger.Store
	meeting *meeting
	once    sync.Once
}

func (s *meetingStore) Apply(ctx context.Context, key ledger.BucketKey, mutate func(*ledger.Bucket) error) (ledger.Bucket, error) {
	var err error
	s.once.Do(func() { err = s.meeting.arrive() })
	if err != nil {
		return ledger.Bucket{}, err
	}
	return s.Store.Apply(ctx, key, mutate)
}

func meetingLedger(t *testing.T, m *meeting, limit int64) *ledger.Ledger {
	t.Helper()
	set := ledger.NewGrantSet()
	if err := set.Set(ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: limit}); err != nil {
		t.Fatal(err)
	}
	return ledger.New(&meetingStore{Store: ledger.NewMemoryStore(), meeting: m}, set)
}

// Issue 26: two evaluations with different ledgers, in flight at once (each
// holds its write until the other has reached its own store), each decide
// against the Env their context carries, not the process's nor each
// other's: the same claim is denied in a ledger of 1 and granted in a
// ledger of 3, and each ledger holds only its own reservation.
func TestEvaluationsWithDifferentEnvsRunSideBySide(t *testing.T) {
	// The process's Env: a ledger granting nothing, which a call that
	// ignored its context's Env would decide against.
	processLedger := useLedger(t)
	m := newMeeting(2)
	small := &builtins.Env{Ledger: meetingLedger(t, m, 1)}
	large := &builtins.Env{Ledger: meetingLedger(t, m, 3)}

	decisions := make([]any, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, env := range []*builtins.Env{small, large} {
		wg.Go(func() {
			rs, err := rego.New(rego.Query("x := quota.reserve(input)"), rego.Input(claim("c1", pods(teamA, 2)))).
				Eval(builtins.WithEnv(context.Background(), env))
			if err == nil && len(rs) != 1 {
				err = errors.New("undefined")
			}
			if err != nil {
				errs[i] = err
				return
			}
			decisions[i] = rs[0].Bindings["x"]
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	assertEqual(t, "decision in the ledger of 1", decisions[0], map[string]any{
		"id": "c1", "granted": false,
		"message": "requested 2 of core/pods, available 1 of 1 (allocated 0, reserved 0)",
		"requests": []any{decisionRequest(teamA, 2, false, ledger.ReasonQuotaExceeded, 1, 0, 1,
			"requested 2 of core/pods, available 1 of 1 (allocated 0, reserved 0)")},
	})
	assertEqual(t, "decision in the ledger of 3", decisions[1], map[string]any{
		"id": "c1", "granted": true,
		"message": "granted 2 of core/pods: available 1 of 3 (allocated 0, reserved 2)",
		"requests": []any{decisionRequest(teamA, 2, true, ledger.ReasonQuotaAvailable, 3, 2, 1,
			"granted 2 of core/pods: available 1 of 3 (allocated 0, reserved 2)")},
	})
	assertEqual(t, "the ledger of 1", usageOf(t, small.Ledger, teamA), ledger.Usage{Limit: 1, Available: 1})
	assertEqual(t, "the ledger of 3", usageOf(t, large.Ledger, teamA), ledger.Usage{Limit: 3, Reserved: 2, Available: 1})
	assertEqual(t, "the process's ledger", usageOf(t, processLedger, teamA), ledger.Usage{})
}

// Without an Env in its context, an evaluation decides against the
// process's; an Env in the context replaces the process's whole (its
// absent units are not filled in from the process's).
func TestTheContextsEnvReplacesTheProcesss(t *testing.T) {
	useLedger(t, ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: 5})
	useEnv(t, func(env *builtins.Env) {
		env.Units = unitMap{"core/pods": {BaseUnit: "pods", DisplayUnit: "pods", UnitConversionFactor: 1}}
	})
	query := map[string]any{"consumer": map[string]any{"kind": "Namespace", "name": "team-a"}, "resourceType": "core/pods"}
	assertEqual(t, "the process's", mustEval(t, "quota.usage(input)", query), map[string]any{
		"bucket": bucket(teamA), "limit": jsonNumber(5), "allocated": jsonNumber(0), "reserved": jsonNumber(0), "available": jsonNumber(5),
		"units":                  map[string]any{"baseUnit": "pods", "displayUnit": "pods", "unitConversionFactor": jsonNumber(1)},
		"effectiveResourceGrant": effectiveGrant(teamA),
	})

	set := ledger.NewGrantSet()
	if err := set.Set(ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: 2}); err != nil {
		t.Fatal(err)
	}
	ctx := builtins.WithEnv(context.Background(), &builtins.Env{Ledger: ledger.New(ledger.NewMemoryStore(), set)})
	assertEqual(t, "the context's", evalIn(t, ctx, "quota.usage(input)", query), map[string]any{
		"bucket": bucket(teamA), "limit": jsonNumber(2), "allocated": jsonNumber(0), "reserved": jsonNumber(0), "available": jsonNumber(2),
		"units":                  map[string]any{},
		"effectiveResourceGrant": effectiveGrant(teamA),
	})
}
