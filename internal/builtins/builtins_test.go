package builtins_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// process is the Env of evaluations whose context carries none, as a
// Gatekeeper process hands its own to Register: most tests here decide
// through it (useEnv), the way Gatekeeper's audit does.
var process atomic.Pointer[builtins.Env]

func TestMain(m *testing.M) {
	if err := builtins.Register(process.Load); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// useEnv makes the process's Env the current one changed by change, until
// the test ends.
func useEnv(t *testing.T, change func(*builtins.Env)) {
	t.Helper()
	var env builtins.Env
	if cur := process.Load(); cur != nil {
		env = *cur
	}
	change(&env)
	process.Store(&env)
	t.Cleanup(func() { process.Store(nil) })
}

var (
	teamA = ledger.Consumer{Kind: "Namespace", Name: "team-a"}
	acme  = ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}
)

// useLedger gives the builtins a fresh memory ledger with the grants.
func useLedger(t *testing.T, grants ...ledger.Grant) *ledger.Ledger {
	t.Helper()
	set := ledger.NewGrantSet()
	if err := set.Set(grants...); err != nil {
		t.Fatal(err)
	}
	l := ledger.New(ledger.NewMemoryStore(), set)
	useEnv(t, func(env *builtins.Env) { env.Ledger = l })
	return l
}

// eval evaluates `x := <call>` with input and returns x, or the evaluation error.
func eval(t *testing.T, call string, input any) (any, error) {
	t.Helper()
	rs, err := rego.New(rego.Query("x := "+call), rego.Input(input)).Eval(context.Background())
	if err != nil {
		return nil, err
	}
	if len(rs) != 1 {
		t.Fatalf("%s: %d results, want 1 (undefined would fail open)", call, len(rs))
	}
	return rs[0].Bindings["x"], nil
}

// mustEval is eval for calls that must succeed.
func mustEval(t *testing.T, call string, input any) any {
	t.Helper()
	v, err := eval(t, call, input)
	if err != nil {
		t.Fatalf("%s: %v", call, err)
	}
	return v
}

// haltMessage asserts that err stopped the evaluation with a builtin error
// and returns its message.
func haltMessage(t *testing.T, err error) string {
	t.Helper()
	var te *topdown.Error
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a topdown error: the call did not halt", err, err)
	}
	if te.Code != topdown.BuiltinErr {
		t.Fatalf("error code %s, want %s", te.Code, topdown.BuiltinErr)
	}
	return te.Message
}

func pods(c ledger.Consumer, amount int64) map[string]any {
	return map[string]any{
		"consumer":     map[string]any{"apiGroup": c.APIGroup, "kind": c.Kind, "name": c.Name},
		"resourceType": "core/pods",
		"amount":       amount,
	}
}

func claim(id string, requests ...map[string]any) map[string]any {
	rs := make([]any, len(requests))
	for i, r := range requests {
		rs[i] = r
	}
	return map[string]any{
		"id":       id,
		"object":   map[string]any{"apiGroup": "", "kind": "Pod", "namespace": "team-a", "name": "p-" + id, "uid": id},
		"requests": rs,
	}
}

func bucket(c ledger.Consumer) string { return ledger.NewBucketKey(c, "core/pods", nil).Name() }

func decisionRequest(c ledger.Consumer, amount int64, granted bool, reason string, limit, reserved, available int64, msg string) map[string]any {
	return map[string]any{
		"consumer":     map[string]any{"apiGroup": c.APIGroup, "kind": c.Kind, "name": c.Name, "namespace": c.Namespace},
		"resourceType": "core/pods",
		"dimensions":   map[string]any{},
		"amount":       jsonNumber(amount),
		"bucket":       bucket(c),
		"granted":      granted,
		"reason":       reason,
		"limit":        jsonNumber(limit),
		"allocated":    jsonNumber(0),
		"reserved":     jsonNumber(reserved),
		"available":    jsonNumber(available),
		"message":      msg,
		// No unit source in these tests: no units.
		"units":                  map[string]any{},
		"effectiveResourceGrant": effectiveGrant(c),
	}
}

func effectiveGrant(c ledger.Consumer) string {
	return quotav1alpha1.EffectiveResourceGrantName(ledgerconv.ConsumerRef(c), "core/pods")
}

func usageOf(t *testing.T, l *ledger.Ledger, c ledger.Consumer) ledger.Usage {
	t.Helper()
	u, err := l.Usage(context.Background(), ledger.NewBucketKey(c, "core/pods", nil))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func assertEqual(t *testing.T, what string, got, want any) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

func TestReserveGrantsThenDeniesWithTheNumbers(t *testing.T) {
	l := useLedger(t, ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: 2})

	got := mustEval(t, "quota.reserve(input)", claim("c1", pods(teamA, 1)))
	assertEqual(t, "first decision", got, map[string]any{
		"id":      "c1",
		"granted": true,
		"message": "granted 1 of core/pods: available 1 of 2 (allocated 0, reserved 1)",
		"requests": []any{decisionRequest(teamA, 1, true, ledger.ReasonQuotaAvailable, 2, 1, 1,
			"granted 1 of core/pods: available 1 of 2 (allocated 0, reserved 1)")},
	})

	got = mustEval(t, "quota.reserve(input)", claim("c2", pods(teamA, 2)))
	assertEqual(t, "second decision", got, map[string]any{
		"id":      "c2",
		"granted": false,
		"message": "requested 2 of core/pods, available 1 of 2 (allocated 0, reserved 1)",
		"requests": []any{decisionRequest(teamA, 2, false, ledger.ReasonQuotaExceeded, 2, 1, 1,
			"requested 2 of core/pods, available 1 of 2 (allocated 0, reserved 1)")},
	})
	assertEqual(t, "usage", usageOf(t, l, teamA), ledger.Usage{Limit: 2, Reserved: 1, Available: 1})
}

func TestReserveIsIdempotentByClaimID(t *testing.T) {
	l := useLedger(t, ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: 2})
	for i := 0; i < 3; i++ {
		got := mustEval(t, "quota.reserve(input).granted", claim("c1", pods(teamA, 1)))
		assertEqual(t, "granted", got, true)
	}
	assertEqual(t, "usage", usageOf(t, l, teamA), ledger.Usage{Limit: 2, Reserved: 1, Available: 1})
}

func TestReserveIsAllOrNothing(t *testing.T) {
	l := useLedger(t,
		ledger.Grant{ID: "ns", Consumer: teamA, ResourceType: "core/pods", Amount: 5},
		ledger.Grant{ID: "org", Consumer: acme, ResourceType: "core/pods", Amount: 1},
	)
	mustEval(t, "quota.reserve(input)", claim("c1", pods(teamA, 1), pods(acme, 1)))
	got := mustEval(t, "quota.reserve(input)", claim("c2", pods(teamA, 1), pods(acme, 1)))
	assertEqual(t, "decision", got, map[string]any{
		"id":      "c2",
		"granted": false,
		"message": "requested 1 of core/pods, available 0 of 1 (allocated 0, reserved 1)",
		"requests": []any{
			decisionRequest(teamA, 1, false, ledger.ReasonQuotaAvailable, 5, 1, 4,
				"requested 1 of core/pods, available 4 of 5 (allocated 0, reserved 1)"),
			decisionRequest(acme, 1, false, ledger.ReasonQuotaExceeded, 1, 1, 0,
				"requested 1 of core/pods, available 0 of 1 (allocated 0, reserved 1)"),
		},
	})
	assertEqual(t, "namespace usage", usageOf(t, l, teamA), ledger.Usage{Limit: 5, Reserved: 1, Available: 4})
	assertEqual(t, "organization usage", usageOf(t, l, acme), ledger.Usage{Limit: 1, Reserved: 1})
}

func TestUsageReadsWithoutWriting(t *testing.T) {
	l := useLedger(t, ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: 3})
	query := map[string]any{"consumer": map[string]any{"kind": "Namespace", "name": "team-a"}, "resourceType": "core/pods"}
	want := func(reserved, available int64) map[string]any {
		return map[string]any{
			"bucket": bucket(teamA), "limit": jsonNumber(3), "allocated": jsonNumber(0),
			"reserved": jsonNumber(reserved), "available": jsonNumber(available),
			"units": map[string]any{}, "effectiveResourceGrant": effectiveGrant(teamA),
		}
	}
	assertEqual(t, "before any reservation", mustEval(t, "quota.usage(input)", query), want(0, 3))
	mustEval(t, "quota.reserve(input)", claim("c1", pods(teamA, 2)))
	assertEqual(t, "after reserving 2", mustEval(t, "quota.usage(input)", query), want(2, 1))
	assertEqual(t, "ledger", usageOf(t, l, teamA), ledger.Usage{Limit: 3, Reserved: 2, Available: 1})
}

// unitMap is a builtins.UnitSource from a map.
type unitMap map[string]quotav1alpha1.Units

func (m unitMap) UnitsFor(rt string) (quotav1alpha1.Units, bool) {
	u, ok := m[rt]
	return u, ok
}

// With a unit source, both builtins return the resource type's units beside
// the numbers, which quota.display writes exactly; without one, or for a
// resource type it does not know, no units.
func TestResultsCarryUnitsAndDisplayWritesThemExactly(t *testing.T) {
	useLedger(t, ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: 2500})
	useEnv(t, func(env *builtins.Env) {
		env.Units = unitMap{"core/pods": {BaseUnit: "millipods", DisplayUnit: "pods", UnitConversionFactor: 1000}}
	})
	units := map[string]any{"baseUnit": "millipods", "displayUnit": "pods", "unitConversionFactor": jsonNumber(1000)}

	d := mustEval(t, "quota.reserve(input)", claim("c1", pods(teamA, 500))).(map[string]any)
	assertEqual(t, "units in the decision", d["requests"].([]any)[0].(map[string]any)["units"], units)
	query := map[string]any{"consumer": map[string]any{"kind": "Namespace", "name": "team-a"}, "resourceType": "core/pods"}
	u := mustEval(t, "quota.usage(input)", query).(map[string]any)
	assertEqual(t, "units in the usage", u["units"], units)
	assertEqual(t, "display of the limit", mustEval(t, "quota.display(quota.usage(input).limit, quota.usage(input).units)", query), "2.5")
	assertEqual(t, "display of the available", mustEval(t, "quota.display(quota.usage(input).available, quota.usage(input).units)", query), "2")

	for _, tc := range []struct {
		call, want string
	}{
		{`quota.display(1, {"baseUnit": "x", "displayUnit": "thirds", "unitConversionFactor": 3})`, "1/3"},
		{`quota.display(1e3, {"baseUnit": "m", "displayUnit": "cores", "unitConversionFactor": 1000})`, "1"},
		{`quota.display(9223372036854775807, {"baseUnit": "m", "displayUnit": "cores", "unitConversionFactor": 1000})`, "9223372036854775.807"},
		{`quota.display(7, {"baseUnit": "pods", "displayUnit": "pods", "unitConversionFactor": 1})`, "7"},
		{`quota.display(7, {})`, "7"},
	} {
		assertEqual(t, tc.call, mustEval(t, tc.call, nil), tc.want)
	}

	useEnv(t, func(env *builtins.Env) { env.Units = nil })
	u = mustEval(t, "quota.usage(input)", query).(map[string]any)
	assertEqual(t, "units without a source", u["units"], map[string]any{})
}

func TestDisplayHaltsOnBadInput(t *testing.T) {
	for _, tc := range []struct {
		call  string
		input any
		want  string
	}{
		{`quota.display(0.5, {})`, nil, "quota.display: amount: must be a whole number, got 0.5"},
		// The type checker refuses a literal string; input reaches the builtin.
		{`quota.display(input, {})`, "1", "quota.display: amount: must be a number, got string"},
		{`quota.display(1, {"displayUnits": "cores"})`, nil, "quota.display: units.displayUnits: unknown field (allowed: baseUnit, displayUnit, unitConversionFactor)"},
		{`quota.display(1, {"unitConversionFactor": "1000"})`, nil, "quota.display: units.unitConversionFactor: must be a number, got string"},
	} {
		_, err := eval(t, tc.call, tc.input)
		if got := haltMessage(t, err); got != tc.want {
			t.Errorf("%s: halted with %q, want %q", tc.call, got, tc.want)
		}
	}
}

func TestInvalidInputHaltsWithTheFieldAndChangesNothing(t *testing.T) {
	ok := pods(teamA, 1)
	with := func(key string, v any) map[string]any {
		r := map[string]any{}
		for k, x := range ok {
			r[k] = x
		}
		if v == nil {
			delete(r, key)
		} else {
			r[key] = v
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		call  string
		input any
		want  string
	}{
		{"negative amount", "quota.reserve(input)", claim("c", with("amount", -3)),
			"quota.reserve: claim.requests[0].amount: must be positive, got -3"},
		{"zero amount", "quota.reserve(input)", claim("c", with("amount", 0)),
			"quota.reserve: claim.requests[0].amount: must be positive, got 0"},
		{"amount beyond int64", "quota.reserve(input)", claim("c", with("amount", jsonNumber("9223372036854775808"))),
			"quota.reserve: claim.requests[0].amount: overflows int64, got 9223372036854775808"},
		{"fractional amount", "quota.reserve(input)", claim("c", with("amount", 1.5)),
			"quota.reserve: claim.requests[0].amount: must be a whole number, got 1.5"},
		{"amount as a string", "quota.reserve(input)", claim("c", with("amount", "1")),
			"quota.reserve: claim.requests[0].amount: must be a number, got string"},
		{"sum of one bucket's requests beyond int64", "quota.reserve(input)",
			claim("c", with("amount", jsonNumber("9223372036854775807")), with("amount", 1)),
			"quota.reserve: claim.requests[1].amount: sum with earlier requests for the same bucket: " + overflowText(t)},
		{"missing consumer", "quota.reserve(input)", claim("c", with("consumer", nil)),
			"quota.reserve: claim.requests[0].consumer: required"},
		{"consumer without name, empty kind", "quota.reserve(input)", claim("c", with("consumer", map[string]any{"kind": ""})),
			"quota.reserve: claim.requests[0].consumer.kind: must not be empty; claim.requests[0].consumer.name: required"},
		{"misspelt field", "quota.reserve(input)", claim("c", with("amout", 1)),
			"quota.reserve: claim.requests[0].amout: unknown field (allowed: consumer, resourceType, amount, total, dimensions)"},
		{"invalid dimension", "quota.reserve(input)", claim("c", with("dimensions", map[string]any{"zone": "eu west"})),
			`quota.reserve: claim.requests[0].dimensions[zone]: invalid value "eu west": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
		{"no id", "quota.reserve(input)", map[string]any{"requests": []any{ok}},
			"quota.reserve: claim.id: required"},
		{"id of the wrong type", "quota.reserve(input)", map[string]any{"id": 7, "requests": []any{ok}},
			"quota.reserve: claim.id: must be a string, got number"},
		{"no requests", "quota.reserve(input)", map[string]any{"id": "c", "requests": []any{}},
			"quota.reserve: claim.requests: must not be empty"},
		{"not an object", "quota.reserve(input.claim)", map[string]any{"claim": "c"},
			"quota.reserve: claim: must be an object, got string"},
		{"misspelt claim field", "quota.reserve(input)", map[string]any{"id": "c", "requests": []any{ok}, "metdata": map[string]any{}},
			"quota.reserve: claim.metdata: unknown field (allowed: id, object, requests, metadata, policyVersion)"},
		{"metadata not an object", "quota.reserve(input)", withMetadata(claim("c", ok), "web"),
			"quota.reserve: claim.metadata: must be an object, got string"},
		{"misspelt metadata field", "quota.reserve(input)", withMetadata(claim("c", ok), map[string]any{"label": map[string]any{}}),
			"quota.reserve: claim.metadata.label: unknown field (allowed: name, generateName, namespace, labels, annotations)"},
		{"metadata fields of the wrong type", "quota.reserve(input)", withMetadata(claim("c", ok), map[string]any{
			"name": 7, "namespace": true, "labels": []any{"app"}, "annotations": map[string]any{"n": 1}}),
			"quota.reserve: claim.metadata.name: must be a string, got number; claim.metadata.namespace: must be a string, got boolean; " +
				"claim.metadata.labels: must be an object of strings, got array; claim.metadata.annotations[n]: must be a string, got number"},
		{"metadata name not a DNS subdomain", "quota.reserve(input)", withMetadata(claim("c", ok), map[string]any{"name": "Web_Pods"}),
			`quota.reserve: claim.metadata.name: Invalid value: "Web_Pods": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"metadata generateName not a prefix", "quota.reserve(input)", withMetadata(claim("c", ok), map[string]any{"generateName": "-web-"}),
			`quota.reserve: claim.metadata.generateName: Invalid value: "-web-": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"metadata namespace not a DNS label", "quota.reserve(input)", withMetadata(claim("c", ok), map[string]any{"namespace": "team.a"}),
			`quota.reserve: claim.metadata.namespace: Invalid value: "team.a": must not contain dots`},
		{"metadata label value invalid", "quota.reserve(input)", withMetadata(claim("c", ok), map[string]any{"labels": map[string]any{"app": "web pods"}}),
			`quota.reserve: claim.metadata.labels: Invalid value: "web pods": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
		{"metadata annotation key invalid", "quota.reserve(input)", withMetadata(claim("c", ok), map[string]any{"annotations": map[string]any{"a b": "x"}}),
			`quota.reserve: claim.metadata.annotations: Invalid value: "a b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`},
		{"usage without resource type", "quota.usage(input)", map[string]any{"consumer": map[string]any{"kind": "Namespace", "name": "team-a"}},
			"quota.usage: query.resourceType: required"},
		{"usage with a misspelt field", "quota.usage(input)", map[string]any{"consumer": map[string]any{"kind": "Namespace", "name": "team-a"}, "resourceType": "core/pods", "dimension": map[string]any{}},
			"quota.usage: query.dimension: unknown field (allowed: consumer, resourceType, dimensions)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := useLedger(t, ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: 10})
			_, err := eval(t, tc.call, tc.input)
			if got := haltMessage(t, err); got != tc.want {
				t.Errorf("message\n got %q\nwant %q", got, tc.want)
			}
			assertEqual(t, "usage", usageOf(t, l, teamA), ledger.Usage{Limit: 10, Available: 10})
		})
	}
}

func withMetadata(c map[string]any, md any) map[string]any {
	c["metadata"] = md
	return c
}

// overflowText is the ledger's own overflow error text, so the test does not
// restate another package's wording.
func overflowText(t *testing.T) string {
	t.Helper()
	_, err := ledger.New(ledger.NewMemoryStore(), ledger.NewGrantSet()).Reserve(context.Background(), ledger.Claim{
		ID: "x",
		Requests: []ledger.Request{
			{Consumer: teamA, ResourceType: "core/pods", Amount: 1<<63 - 1},
			{Consumer: teamA, ResourceType: "core/pods", Amount: 1},
		},
	})
	var verr *ledger.ValidationError
	if !errors.As(err, &verr) || len(verr.Errors) != 1 {
		t.Fatalf("ledger overflow error: %v", err)
	}
	const prefix = "sum with earlier requests for the same bucket: "
	return verr.Errors[0].Detail[len(prefix):]
}

func TestEveryCallHaltsWithoutALedger(t *testing.T) {
	useEnv(t, func(env *builtins.Env) { env.Ledger = nil })
	for call, input := range map[string]any{
		"quota.reserve(input)":    claim("c", pods(teamA, 1)),
		"quota.usage(input)":      map[string]any{"consumer": map[string]any{"kind": "Namespace", "name": "team-a"}, "resourceType": "core/pods"},
		"quota.over_limit(input)": "core/pods",
	} {
		_, err := eval(t, call, input)
		name := call[:len(call)-len("(input)")]
		want := name + ": quota is not ready: the plugin has not loaded the ResourceGrants yet (it decides nothing until it has; see docs/troubleshooting.md)"
		if got := haltMessage(t, err); got != want {
			t.Errorf("%s: message %q, want %q", call, got, want)
		}
	}
}

type brokenStore struct{}

var errBroken = errors.New("etcd unavailable")

func (brokenStore) Apply(context.Context, ledger.BucketKey, func(*ledger.Bucket) error) (ledger.Bucket, error) {
	return ledger.Bucket{}, errBroken
}
func (brokenStore) Get(context.Context, ledger.BucketKey) (ledger.Bucket, bool, error) {
	return ledger.Bucket{}, false, errBroken
}
func (brokenStore) List(context.Context) ([]ledger.Bucket, error) { return nil, errBroken }

func TestStoreErrorsHalt(t *testing.T) {
	useEnv(t, func(env *builtins.Env) { env.Ledger = ledger.New(brokenStore{}, ledger.NewGrantSet()) })
	_, err := eval(t, "quota.reserve(input)", claim("c1", pods(teamA, 1)))
	assertEqual(t, "reserve", haltMessage(t, err), `quota.reserve: reserving claim "c1": etcd unavailable`)
	_, err = eval(t, "quota.usage(input)", map[string]any{"consumer": map[string]any{"kind": "Namespace", "name": "team-a"}, "resourceType": "core/pods"})
	assertEqual(t, "usage", haltMessage(t, err), "quota.usage: reading bucket "+bucket(teamA)+": etcd unavailable")
	// A store that cannot tell says yes: audit then reads each bucket
	// with quota.usage, which halts as above.
	assertEqual(t, "over_limit", mustEval(t, "quota.over_limit(input)", "core/pods"), true)
}

func TestOverLimitSaysWhetherAnyBucketHoldsMoreThanItsLimit(t *testing.T) {
	set := ledger.NewGrantSet()
	setLimit := func(amount int64) {
		t.Helper()
		if err := set.Set(ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: amount}); err != nil {
			t.Fatal(err)
		}
	}
	setLimit(3)
	l := ledger.New(ledger.NewMemoryStore(), set)
	useEnv(t, func(env *builtins.Env) { env.Ledger = l })

	assertEqual(t, "no bucket", mustEval(t, "quota.over_limit(input)", "core/pods"), false)
	mustEval(t, "quota.reserve(input)", claim("c1", pods(teamA, 3)))
	assertEqual(t, "reserved 3 of 3", mustEval(t, "quota.over_limit(input)", "core/pods"), false)
	setLimit(2)
	if _, err := l.Refresh(context.Background(), ledger.NewBucketKey(teamA, "core/pods", nil)); err != nil {
		t.Fatal(err)
	}
	assertEqual(t, "reserved 3 of a lowered 2", mustEval(t, "quota.over_limit(input)", "core/pods"), true)
	assertEqual(t, "another resource type", mustEval(t, "quota.over_limit(input)", "core/services"), false)

	_, err := eval(t, "quota.over_limit(input)", "")
	assertEqual(t, "empty resource type", haltMessage(t, err), `quota.over_limit: resourceType must be a non-empty string, got ""`)
}

func TestQuantity(t *testing.T) {
	for _, tc := range []struct {
		value any
		unit  string
		want  any
	}{
		{"500m", "m", jsonNumber(500)},
		{"2", "m", jsonNumber(2000)},
		{"0.1", "m", jsonNumber(100)},
		{"1Gi", "Mi", jsonNumber(1024)},
		{"1Gi", "", jsonNumber(1073741824)},
		{"1536Mi", "Gi", jsonNumber(2)}, // 1.5 rounds up
		{"100m", "", jsonNumber(1)},     // 0.1 rounds up
		{"1k", "", jsonNumber(1000)},
		{"0", "m", jsonNumber(0)},
		{2, "m", jsonNumber(2000)},
		{0.25, "m", jsonNumber(250)},
		{jsonNumber("1e3"), "", jsonNumber(1000)},
		{"8E", "", jsonNumber(8000000000000000000)},
	} {
		got := mustEval(t, "quota.quantity(input.v, input.u)", map[string]any{"v": tc.value, "u": tc.unit})
		if got != tc.want {
			t.Errorf("quota.quantity(%v, %q) = %v, want %v", tc.value, tc.unit, got, tc.want)
		}
	}
}

func TestQuantityHaltsOnBadInput(t *testing.T) {
	for _, tc := range []struct {
		value any
		unit  string
		want  string
	}{
		{"lots", "", `quota.quantity: value: "lots": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
		{"-1", "", "quota.quantity: value: must not be negative, got -1"},
		{true, "", "quota.quantity: value: must be a quantity string or a number, got boolean"},
		{"1", "cores", `quota.quantity: unit: "cores" is not a quantity suffix (use "", "m", "k", "M", "Ki", "Mi", "Gi", ...)`},
		{"10E", "m", `quota.quantity: value 10E in units of "m": overflows int64`},
		// apimachinery's parser spins on these (found by FuzzQuantity).
		{"1e2147483648", "", `quota.quantity: value: "1e2147483648": exponent 2147483648 out of range (at most ±1000)`},
		{"10000E200000000020000000", "", `quota.quantity: value: "10000E200000000020000000": exponent 200000000020000000 out of range (at most ±1000)`},
		{"1", "e-9999999999", `quota.quantity: unit: "e-9999999999" is not a quantity suffix (use "", "m", "k", "M", "Ki", "Mi", "Gi", ...)`},
		// A large exponent within range is decided without writing it out.
		{"1e1000", "", `quota.quantity: value 10e999 in units of "": overflows int64`},
	} {
		_, err := eval(t, "quota.quantity(input.v, input.u)", map[string]any{"v": tc.value, "u": tc.unit})
		if got := haltMessage(t, err); got != tc.want {
			t.Errorf("quota.quantity(%v, %q):\n got %q\nwant %q", tc.value, tc.unit, got, tc.want)
		}
	}
}

func TestRegisterDeclaresEachBuiltinOnceNondeterministicWhereStateful(t *testing.T) {
	// Again (TestMain did): refused, so nothing is declared twice.
	if err := builtins.Register(nil); err == nil || err.Error() != "the quota builtins are already registered: a process registers them once" {
		t.Errorf("second Register: %v", err)
	}
	want := map[string]bool{builtins.ReserveName: true, builtins.UsageName: true, builtins.OverLimitName: true, builtins.QuantityName: false}
	seen := map[string]int{}
	for _, b := range ast.Builtins {
		if nd, ours := want[b.Name]; ours {
			seen[b.Name]++
			if b.Nondeterministic != nd {
				t.Errorf("%s: Nondeterministic %v, want %v", b.Name, b.Nondeterministic, nd)
			}
		}
	}
	assertEqual(t, "declarations", seen, map[string]int{builtins.ReserveName: 1, builtins.UsageName: 1, builtins.OverLimitName: 1, builtins.QuantityName: 1})
}

func TestCapabilitiesDeclareTheBuiltinsOnceAmongOPAs(t *testing.T) {
	c := builtins.Capabilities()
	names := map[string]int{}
	for i, b := range c.Builtins {
		names[b.Name]++
		if i > 0 && c.Builtins[i-1].Name > b.Name {
			t.Fatalf("builtins not sorted: %s before %s", c.Builtins[i-1].Name, b.Name)
		}
	}
	for _, n := range []string{builtins.ReserveName, builtins.UsageName, builtins.QuantityName, "count", "sprintf"} {
		if names[n] != 1 {
			t.Errorf("%s declared %d times, want 1", n, names[n])
		}
	}
	// A compiler given only these capabilities accepts calls to the builtins.
	mod, err := ast.ParseModule("p.rego", `package p
r := quota.reserve({"id": "x", "requests": []})
u := quota.usage({})
q := quota.quantity("1", "m")`)
	if err != nil {
		t.Fatal(err)
	}
	comp := ast.NewCompiler().WithCapabilities(c)
	if comp.Compile(map[string]*ast.Module{"p.rego": mod}); comp.Failed() {
		t.Fatal(comp.Errors)
	}
	// And without them the same module does not compile: the test can fail.
	bare := ast.CapabilitiesForThisVersion()
	bare.Builtins = slices.DeleteFunc(bare.Builtins, func(b *ast.Builtin) bool { return strings.HasPrefix(b.Name, "quota.") })
	comp = ast.NewCompiler().WithCapabilities(bare)
	if comp.Compile(map[string]*ast.Module{"p.rego": mod}); !comp.Failed() {
		t.Fatal("a compiler without the quota declarations accepted calls to them")
	}
}

func jsonNumber[T int | int64 | string](v T) json.Number {
	return json.Number(fmt.Sprint(v))
}

// stalledStore never finishes a write: an apiserver that stopped answering.
// It honours ctx as kubestore does for a mutation still queued.
type stalledStore struct{ brokenStore }

func (stalledStore) Apply(ctx context.Context, key ledger.BucketKey, _ func(*ledger.Bucket) error) (ledger.Bucket, error) {
	<-ctx.Done()
	return ledger.Bucket{}, fmt.Errorf("bucket %s not written: %w", key.Name(), context.Cause(ctx))
}

// Done when: a reserve that cannot finish within the deadline halts (so the
// request is denied) with a message that says so, instead of outliving the
// admission request.
func TestReserveHaltsAtTheDeadline(t *testing.T) {
	useEnv(t, func(env *builtins.Env) {
		env.Ledger, env.Deadline = ledger.New(stalledStore{}, ledger.NewGrantSet()), 50*time.Millisecond
	})
	_, err := eval(t, "quota.reserve(input)", claim("c1", pods(teamA, 1)))
	assertEqual(t, "reserve", haltMessage(t, err),
		`quota.reserve: reserving claim "c1": bucket `+bucket(teamA)+` not written: no decision within the quota deadline of 50ms`)
}
