package rego_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/frameworks/constraint/pkg/apis/externaldata/unversioned"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/drivers/rego"
	frameworks "github.com/open-policy-agent/frameworks/constraint/pkg/externaldata"
	"github.com/open-policy-agent/opa/v1/ast"
	opa "github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/externaldata"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	quotarego "github.com/quotakeeper/quotakeeper/rego"
)

// The template tests run again on the templates' External Data twins: a
// frameworks driver with External Data and Gatekeeper's response cache (as
// a stock Gatekeeper v3.23.1 builds it), calling quotakeeper's provider
// handler over TLS, which answers with the builtins over the same memory
// ledger. Every message they assert must come out the same: the twins
// decide and word denials exactly as the builtins linked into Gatekeeper.
// And once more on the twins as the manager's observer loads them
// (rego.ForBuiltins: lib.quotabuiltins calling the builtins themselves).
// The provider runs in the test's process, so it decides with the ledger
// and the ClaimCreationPolicies the harness gives the builtins. Left out:
// the tests that assert the builtins' halts (TestFailsClosed,
// TestClaimPolicyWithoutPoliciesFailsClosed), which the twins word as
// TestExternalDataProviderErrorDenies shows, and those of the observe mode
// or of no template.
func TestTemplatesThroughExternalData(t *testing.T) {
	tests := templateTests()
	for _, m := range []harnessMode{twinThroughProvider, twinWithBuiltins} {
		for _, tc := range tests {
			t.Run(string(m)+"/"+tc.name, func(t *testing.T) {
				setMode(t, m)
				tc.test(t)
			})
		}
	}
}

// A provider that does not answer denies, in plain words, and reserves
// nothing: never the silent allow of an unchecked system_error.
func TestExternalDataProviderDownDenies(t *testing.T) {
	setMode(t, twinThroughProvider)
	h := newHarness(t, "quotaentity", perNamespace)
	h.grant("g", teamA, "core/configmaps", 3)
	assertMessages(t, "provider up", h.review(request{op: create, uid: "req-1", obj: configMap("team-a", "cm1")}))
	stopProvider(t)
	got := h.review(request{op: create, uid: "req-2", obj: configMap("team-a", "cm2")})
	const prefix = "quota cannot decide: quotakeeper's External Data provider did not answer (failed to send external data request: "
	const suffix = "); the request is denied and nothing was reserved. Retry in a minute; if it keeps failing, tell your platform team (docs/troubleshooting.md#quota-cannot-decide)"
	if len(got) != 1 || !strings.HasPrefix(got[0], prefix) || !strings.HasSuffix(got[0], suffix) {
		t.Errorf("provider down: violations %q, want one %q...%q", got, prefix, suffix)
	}
	// A dry run, which asks quota.usage, is denied alike.
	got = h.review(request{op: create, uid: "req-3", obj: configMap("team-a", "cm3"), dryRun: true})
	if len(got) != 1 || !strings.HasPrefix(got[0], prefix) {
		t.Errorf("provider down, dry run: violations %q, want one %q...", got, prefix)
	}
	assertUsage(t, h, teamA, "core/configmaps", ledger.Usage{Limit: 3, Reserved: 1, Available: 2})
}

// An error the provider answers (here: no ledger yet) is the denial's reason.
func TestExternalDataProviderErrorDenies(t *testing.T) {
	setMode(t, twinThroughProvider)
	h := newHarness(t, "quotaentity", perNamespace)
	h.env.Ledger = nil
	assertMessages(t, "provider not ready", h.review(request{op: create, uid: "req-1", obj: configMap("team-a", "cm1")}),
		"quota cannot decide: quota is not ready: the plugin has not loaded the ResourceGrants yet (it decides nothing until it has; see docs/troubleshooting.md); the request is denied and nothing was reserved. Retry in a minute; if it keeps failing, tell your platform team (docs/troubleshooting.md#quota-cannot-decide)")
}

// templateTests are the template tests that every mode must pass with
// the same messages.
func templateTests() []templateTest {
	return []templateTest{
		{"EntityAllowsUpToTheLimitAndDeniesPastIt", TestEntityAllowsUpToTheLimitAndDeniesPastIt},
		{"EntityRepeatedRequestReservesOnce", TestEntityRepeatedRequestReservesOnce},
		{"EntityDryRunAuditAndUIDlessReviewsNeverReserve", TestEntityDryRunAuditAndUIDlessReviewsNeverReserve},
		{"EntityUpdatesAndDeletesReserveNothing", TestEntityUpdatesAndDeletesReserveNothing},
		{"EntitySharedQuotaAcrossNamespacesWithTheSameLabel", TestEntitySharedQuotaAcrossNamespacesWithTheSameLabel},
		{"EntityProjectAndOrganizationCapsTheSmallerWins", TestEntityProjectAndOrganizationCapsTheSmallerWins},
		{"EntityReadsTheNamespaceObjectGatekeeperAttaches", TestEntityReadsTheNamespaceObjectGatekeeperAttaches},
		{"AuditReportsBucketsOverTheirLimit", TestAuditReportsBucketsOverTheirLimit},
		{"AllocationCountsReplicasTimesRequestsInMillicores", TestAllocationCountsReplicasTimesRequestsInMillicores},
		{"AllocationUpdateReservesOnlyTheGrowth", TestAllocationUpdateReservesOnlyTheGrowth},
		{"ClaimPolicyAllowsUpToTheGrantAndDeniesPastIt", TestClaimPolicyAllowsUpToTheGrantAndDeniesPastIt},
		{"ClaimPolicyConditionsDecideWhetherTheObjectClaims", TestClaimPolicyConditionsDecideWhetherTheObjectClaims},
		{"ClaimPolicyCELErrorDeniesWithTheMessage", TestClaimPolicyCELErrorDeniesWithTheMessage},
		{"ClaimPoliciesEachClaimAndEachIsAllOrNothing", TestClaimPoliciesEachClaimAndEachIsAllOrNothing},
		{"ClaimPolicyDryRunAuditAndUpdatesNeverReserve", TestClaimPolicyDryRunAuditAndUpdatesNeverReserve},
	}
}

type templateTest struct {
	name string
	test func(*testing.T)
}

// harnessMode is what a test's harness runs.
type harnessMode string

// The default, "", runs the templates, calling the builtins.
const (
	// twinThroughProvider: the twins, asking the provider.
	twinThroughProvider harnessMode = "ExternalData"
	// twinWithBuiltins: the twins as the observer loads them.
	twinWithBuiltins harnessMode = "TwinCountedWithBuiltins"
	// observersDriver: the templates on the observer's driver
	// (internal/preparedrego).
	observersDriver harnessMode = "ObserversDriver"
)

// modes holds each test's (its *testing.T's) harness mode.
var modes sync.Map

func setMode(t testing.TB, m harnessMode) {
	modes.Store(t, m)
	t.Cleanup(func() { modes.Delete(t) })
}

func mode(t testing.TB) harnessMode {
	m, _ := modes.Load(t)
	mm, _ := m.(harnessMode)
	return mm
}

// providers are the running test providers, by test, for stopProvider.
var providers sync.Map

// externalDataArgs starts the provider for t, deciding against env, and
// returns the driver
// arguments that reach it: a Provider "quotakeeper" with its URL and CA
// bundle, a 3-minute response cache as Gatekeeper's default.
func externalDataArgs(t testing.TB, env func() *builtins.Env) []rego.Arg {
	t.Helper()
	srv := httptest.NewUnstartedServer(externaldata.Handler{Env: env})
	srv.StartTLS()
	t.Cleanup(srv.Close)
	providers.Store(t, srv)
	t.Cleanup(func() { providers.Delete(t) })
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cache := frameworks.NewCache()
	if err := cache.Upsert(&unversioned.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: quotarego.ExternalDataProvider},
		Spec: unversioned.ProviderSpec{
			URL:      srv.URL + externaldata.Path,
			Timeout:  5,
			CABundle: base64.StdEncoding.EncodeToString(ca),
		},
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return []rego.Arg{
		rego.AddExternalDataProviderCache(cache),
		rego.AddExternalDataProviderResponseCache(frameworks.NewProviderResponseCache(ctx, 3*time.Minute)),
	}
}

func stopProvider(t testing.TB) {
	t.Helper()
	srv, ok := providers.Load(t)
	if !ok {
		t.Fatal("no provider runs for this test")
	}
	srv.(*httptest.Server).Close()
}

// A twin sends the provider what quota.review reads of the review
// (builtins.ReviewRead), not the reviewed object: a key carries its
// arguments whole, and Gatekeeper caches responses by key.
func TestExternalDataTwinSendsWhatQuotaReviewReads(t *testing.T) {
	facts := `{"review": {"operation": "CREATE", "uid": "req-1", "dryRun": false, "kind": {"group": "", "kind": "ConfigMap"},
		"name": "cm", "namespace": "team-a", "userInfo": {"username": "alice"},
		"object": {"metadata": {"name": "cm", "namespace": "team-a", "uid": "u-1", "labels": {"app": "web"},
			"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}"}}, "data": {"big": "..."}},
		"oldObject": null,
		"namespaceObject": {"metadata": {"name": "team-a", "labels": {"org": "acme"}, "managedFields": []}, "spec": {}}},
		"parameters": {"resourceType": "core/configmaps"}, "scale": null, "inventoryNamespaceLabels": null}`
	want := `{"review": {"operation": "CREATE", "uid": "req-1", "dryRun": false, "kind": {"group": "", "kind": "ConfigMap"},
		"name": "cm", "namespace": "team-a",
		"object": {"metadata": {"name": "cm", "namespace": "team-a", "uid": "u-1", "labels": {"app": "web"}}},
		"namespaceObject": {"metadata": {"name": "team-a", "labels": {"org": "acme"}}}},
		"parameters": {"resourceType": "core/configmaps"}, "scale": null, "inventoryNamespaceLabels": null}`
	// The lib compiles against Gatekeeper's external_data, not called here.
	externalData := opa.Function1(&opa.Function{Name: "external_data", Decl: types.NewFunction(types.Args(types.A), types.A)},
		func(opa.BuiltinContext, *ast.Term) (*ast.Term, error) { return nil, nil })
	rs, err := opa.New(
		externalData,
		opa.Module("externaldata.rego", quotarego.ExternalDataLib()),
		opa.Query("data.lib.quotabuiltins.review_read("+facts+")"),
	).Eval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		t.Fatalf("results %v, want one value", rs)
	}
	var wantValue any
	if err := json.Unmarshal([]byte(want), &wantValue); err != nil {
		t.Fatal(err)
	}
	if got := rs[0].Expressions[0].Value; !reflect.DeepEqual(got, wantValue) {
		g, _ := json.Marshal(got)
		t.Errorf("sent\n got %s\nwant %s", g, want)
	}
}
