package rego_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	opa "github.com/open-policy-agent/opa/v1/rego"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/builtins"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	quotarego "github.com/quotakeeper/quotakeeper/rego"
)

const (
	create = admissionv1.Create
	update = admissionv1.Update
	remove = admissionv1.Delete
)

var (
	teamA = ledger.Consumer{Kind: "Namespace", Name: "team-a"}
	acme  = ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}
	web   = ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: "web"}
)

const orgLabel = "resourcemanager.miloapis.com/organization"

func configMap(ns, name string) map[string]any {
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": name, "namespace": ns, "uid": "uid-" + ns + "-" + name},
	}
}

func deployment(ns, name string, replicas int64, cpu ...string) map[string]any {
	var containers []any
	for i, c := range cpu {
		containers = append(containers, map[string]any{
			"name":      fmt.Sprintf("c%d", i),
			"image":     "nginx",
			"resources": map[string]any{"requests": map[string]any{"cpu": c}},
		})
	}
	return map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   map[string]any{"name": name, "namespace": ns, "uid": "uid-" + ns + "-" + name},
		"spec": map[string]any{
			"replicas": replicas,
			"template": map[string]any{"spec": map[string]any{"containers": containers}},
		},
	}
}

// atGeneration returns a copy of obj at metadata.generation g, as the
// apiserver sets it before validating admission.
func atGeneration(obj map[string]any, g int64) map[string]any {
	out := maps.Clone(obj)
	md := maps.Clone(obj["metadata"].(map[string]any))
	md["generation"] = g
	out["metadata"] = md
	return out
}

func assertMessages(t *testing.T, step string, got []string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: violations\n got %q\nwant %q", step, got, want)
	}
}

func assertUsage(t *testing.T, h *harness, c ledger.Consumer, resourceType string, want ledger.Usage) {
	t.Helper()
	if got := h.usage(c, resourceType); got != want {
		t.Errorf("usage of %s %s: got %+v, want %+v", c.Kind, c.Name, got, want)
	}
}

var perNamespace = map[string]any{"resourceType": "core/configmaps"}

func TestEntityAllowsUpToTheLimitAndDeniesPastIt(t *testing.T) {
	h := newHarness(t, "quotaentity", perNamespace)
	h.grant("g", teamA, "core/configmaps", 3)
	for i := 1; i <= 3; i++ {
		got := h.review(request{op: create, uid: fmt.Sprint("req-", i), obj: configMap("team-a", fmt.Sprint("cm", i))})
		assertMessages(t, fmt.Sprint("create ", i), got)
	}
	got := h.review(request{op: create, uid: "req-4", obj: configMap("team-a", "cm4")})
	assertMessages(t, "create 4", got,
		"quota exceeded for Namespace team-a: requested 1 of core/configmaps, available 0 of 3 (allocated 0, reserved 3)"+seeEffective("team-a", teamA, "core/configmaps"))
	assertUsage(t, h, teamA, "core/configmaps", ledger.Usage{Limit: 3, Reserved: 3, Available: 0})
}

func TestEntityRepeatedRequestReservesOnce(t *testing.T) {
	h := newHarness(t, "quotaentity", perNamespace)
	h.grant("g", teamA, "core/configmaps", 1)
	// The API server retries a webhook call with the same request; Gatekeeper
	// may evaluate one request more than once. Both find the reservation.
	for i := 0; i < 3; i++ {
		assertMessages(t, fmt.Sprint("evaluation ", i+1), h.review(request{op: create, uid: "req-1", obj: configMap("team-a", "cm1")}))
	}
	assertUsage(t, h, teamA, "core/configmaps", ledger.Usage{Limit: 1, Reserved: 1})
	assertMessages(t, "another object", h.review(request{op: create, uid: "req-2", obj: configMap("team-a", "cm2")}),
		"quota exceeded for Namespace team-a: requested 1 of core/configmaps, available 0 of 1 (allocated 0, reserved 1)"+seeEffective("team-a", teamA, "core/configmaps"))
}

func TestEntityDryRunAuditAndUIDlessReviewsNeverReserve(t *testing.T) {
	h := newHarness(t, "quotaentity", perNamespace)
	h.grant("g", teamA, "core/configmaps", 1)
	none := ledger.Usage{Limit: 1, Available: 1}

	assertMessages(t, "dry run", h.review(request{op: create, uid: "req-1", obj: configMap("team-a", "cm1"), dryRun: true}))
	assertUsage(t, h, teamA, "core/configmaps", none)
	assertMessages(t, "audit", h.audit(configMap("team-a", "cm0")))
	assertUsage(t, h, teamA, "core/configmaps", none)
	assertMessages(t, "admission review without a uid", h.review(request{op: create, obj: configMap("team-a", "cm1")}))
	assertUsage(t, h, teamA, "core/configmaps", none)

	assertMessages(t, "create", h.review(request{op: create, uid: "req-2", obj: configMap("team-a", "cm1")}))
	assertUsage(t, h, teamA, "core/configmaps", ledger.Usage{Limit: 1, Reserved: 1})

	// At the limit a dry run is denied with exactly the real request's message.
	full := "quota exceeded for Namespace team-a: requested 1 of core/configmaps, available 0 of 1 (allocated 0, reserved 1)" + seeEffective("team-a", teamA, "core/configmaps")
	assertMessages(t, "dry run at the limit", h.review(request{op: create, uid: "req-3", obj: configMap("team-a", "cm2"), dryRun: true}), full)
	assertMessages(t, "create at the limit", h.review(request{op: create, uid: "req-4", obj: configMap("team-a", "cm2")}), full)
	assertMessages(t, "audit at (not over) the limit", h.audit(configMap("team-a", "cm1")))
	assertUsage(t, h, teamA, "core/configmaps", ledger.Usage{Limit: 1, Reserved: 1})
}

func TestEntityUpdatesAndDeletesReserveNothing(t *testing.T) {
	h := newHarness(t, "quotaentity", perNamespace)
	h.grant("g", teamA, "core/configmaps", 1)
	cm := configMap("team-a", "cm1")
	assertMessages(t, "create", h.review(request{op: create, uid: "req-1", obj: cm}))
	assertMessages(t, "update", h.review(request{op: update, uid: "req-2", obj: cm, old: cm}))
	assertMessages(t, "delete", h.review(request{op: remove, uid: "req-3", obj: cm, old: cm}))
	assertUsage(t, h, teamA, "core/configmaps", ledger.Usage{Limit: 1, Reserved: 1})
}

var byOrganization = map[string]any{
	"resourceType": "core/configmaps",
	"consumers":    []any{map[string]any{"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization"}},
}

func TestEntitySharedQuotaAcrossNamespacesWithTheSameLabel(t *testing.T) {
	h := newHarness(t, "quotaentity", byOrganization)
	h.namespace("team-a", map[string]string{orgLabel: "acme"})
	h.namespace("team-b", map[string]string{orgLabel: "acme"})
	h.namespace("team-c", map[string]string{orgLabel: "globex"})
	h.grant("acme", acme, "core/configmaps", 2)
	h.grant("globex", ledger.Consumer{APIGroup: acme.APIGroup, Kind: acme.Kind, Name: "globex"}, "core/configmaps", 1)

	assertMessages(t, "team-a", h.review(request{op: create, uid: "req-1", obj: configMap("team-a", "cm1")}))
	assertMessages(t, "team-b", h.review(request{op: create, uid: "req-2", obj: configMap("team-b", "cm1")}))
	assertMessages(t, "team-a again", h.review(request{op: create, uid: "req-3", obj: configMap("team-a", "cm2")}),
		"quota exceeded for Organization acme: requested 1 of core/configmaps, available 0 of 2 (allocated 0, reserved 2)"+seeEffective("team-a", acme, "core/configmaps"))
	assertMessages(t, "team-c, another organization", h.review(request{op: create, uid: "req-4", obj: configMap("team-c", "cm1")}))
	assertUsage(t, h, acme, "core/configmaps", ledger.Usage{Limit: 2, Reserved: 2})
}

func TestEntityProjectAndOrganizationCapsTheSmallerWins(t *testing.T) {
	params := map[string]any{
		"resourceType": "core/configmaps",
		"consumers": []any{
			map[string]any{"apiGroup": "resourcemanager.miloapis.com", "kind": "Project"},
			map[string]any{"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization"},
		},
	}
	labels := map[string]string{orgLabel: "acme", "resourcemanager.miloapis.com/project": "web"}
	for _, tc := range []struct {
		name             string
		project, org     int64
		denied           string
		projectReserved  int64
		orgReserved      int64
		projectAvailable int64
		orgAvailable     int64
	}{
		{
			name: "organization smaller", project: 5, org: 2,
			denied:          "quota exceeded for Organization acme: requested 1 of core/configmaps, available 0 of 2 (allocated 0, reserved 2)" + seeEffective("team-a", acme, "core/configmaps"),
			projectReserved: 2, orgReserved: 2, projectAvailable: 3, orgAvailable: 0,
		},
		{
			name: "project smaller", project: 2, org: 5,
			denied:          "quota exceeded for Project web: requested 1 of core/configmaps, available 0 of 2 (allocated 0, reserved 2)" + seeEffective("team-a", web, "core/configmaps"),
			projectReserved: 2, orgReserved: 2, projectAvailable: 0, orgAvailable: 3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "quotaentity", params)
			h.namespace("team-a", labels)
			h.grant("web", web, "core/configmaps", tc.project)
			h.grant("acme", acme, "core/configmaps", tc.org)
			assertMessages(t, "create 1", h.review(request{op: create, uid: "req-1", obj: configMap("team-a", "cm1")}))
			assertMessages(t, "create 2", h.review(request{op: create, uid: "req-2", obj: configMap("team-a", "cm2")}))
			assertMessages(t, "create 3", h.review(request{op: create, uid: "req-3", obj: configMap("team-a", "cm3")}), tc.denied)
			// All or nothing: the refused create holds nothing in the other bucket either.
			assertUsage(t, h, web, "core/configmaps", ledger.Usage{Limit: tc.project, Reserved: tc.projectReserved, Available: tc.projectAvailable})
			assertUsage(t, h, acme, "core/configmaps", ledger.Usage{Limit: tc.org, Reserved: tc.orgReserved, Available: tc.orgAvailable})
		})
	}
}

func TestEntityReadsTheNamespaceObjectGatekeeperAttaches(t *testing.T) {
	h := newHarness(t, "quotaentity", byOrganization)
	h.grant("acme", acme, "core/configmaps", 1)
	// Not in the inventory: Gatekeeper's webhook attaches the namespace to
	// the review (input.review.namespaceObject), fresh from its cache.
	ns := namespaceObject("team-a", map[string]string{orgLabel: "acme"})
	assertMessages(t, "labelled", h.review(request{op: create, uid: "req-1", obj: configMap("team-a", "cm1"), namespaces: ns}))
	assertUsage(t, h, acme, "core/configmaps", ledger.Usage{Limit: 1, Reserved: 1})

	unlabelled := namespaceObject("team-a", nil)
	assertMessages(t, "unlabelled", h.review(request{op: create, uid: "req-2", obj: configMap("team-a", "cm2"), namespaces: unlabelled}),
		`quota: cannot find the Organization of namespace "team-a": it has no label "resourcemanager.miloapis.com/organization"`)
	assertMessages(t, "unknown", h.review(request{op: create, uid: "req-3", obj: configMap("team-a", "cm3")}),
		`quota: cannot find the Organization of namespace "team-a": the namespace is not in Gatekeeper's synced inventory (sync v1 Namespace)`)
	assertUsage(t, h, acme, "core/configmaps", ledger.Usage{Limit: 1, Reserved: 1})
}

func TestAuditReportsBucketsOverTheirLimit(t *testing.T) {
	h := newHarness(t, "quotaentity", perNamespace)
	h.grant("g", teamA, "core/configmaps", 2)
	assertMessages(t, "create 1", h.review(request{op: create, uid: "req-1", obj: configMap("team-a", "cm1")}))
	assertMessages(t, "create 2", h.review(request{op: create, uid: "req-2", obj: configMap("team-a", "cm2")}))
	assertMessages(t, "audit at the limit", h.audit(configMap("team-a", "cm1")))

	// Lowering a limit never revokes what is held; the grant controller
	// refreshes the bucket's limit and audit shows the excess.
	h.grant("g", teamA, "core/configmaps", 1)
	if _, err := h.ledger.Refresh(h.ctx, ledger.NewBucketKey(teamA, "core/configmaps", nil)); err != nil {
		t.Fatal(err)
	}
	assertMessages(t, "audit over the limit", h.audit(configMap("team-a", "cm1")),
		"Namespace team-a is over its quota of core/configmaps: allocated 0, reserved 2, limit 1")
	assertUsage(t, h, teamA, "core/configmaps", ledger.Usage{Limit: 1, Reserved: 2})
}

var cpuPerDeployment = map[string]any{
	"resourceType": "core/requests.cpu",
	"amount":       map[string]any{"resource": "cpu", "replicasPath": []any{"spec", "replicas"}, "unit": "m"},
}

func TestAllocationCountsReplicasTimesRequestsInMillicores(t *testing.T) {
	h := newHarness(t, "quotaallocation", cpuPerDeployment)
	h.grant("g", teamA, "core/requests.cpu", 2000)
	assertMessages(t, "3 x (500m + 0.1)", h.review(request{op: create, uid: "req-1", obj: deployment("team-a", "web", 3, "500m", "0.1")}))
	assertUsage(t, h, teamA, "core/requests.cpu", ledger.Usage{Limit: 2000, Reserved: 1800, Available: 200})
	assertMessages(t, "1 x 1", h.review(request{op: create, uid: "req-2", obj: deployment("team-a", "api", 1, "1")}),
		"quota exceeded for Namespace team-a: requested 1000 of core/requests.cpu, available 200 of 2000 (allocated 0, reserved 1800)"+seeEffective("team-a", teamA, "core/requests.cpu"))
	assertMessages(t, "2 x 100m", h.review(request{op: create, uid: "req-3", obj: deployment("team-a", "api", 2, "100m")}))
	assertUsage(t, h, teamA, "core/requests.cpu", ledger.Usage{Limit: 2000, Reserved: 2000})
	assertMessages(t, "0 replicas counts nothing", h.review(request{op: create, uid: "req-4", obj: deployment("team-a", "idle", 0, "8")}))
}

func TestAllocationUpdateReservesOnlyTheGrowth(t *testing.T) {
	h := newHarness(t, "quotaallocation", cpuPerDeployment)
	h.grant("g", teamA, "core/requests.cpu", 1600)
	v1 := atGeneration(deployment("team-a", "web", 2, "500m"), 1)
	assertMessages(t, "create 2 x 500m", h.review(request{op: create, uid: "req-1", obj: v1}))
	v2 := atGeneration(deployment("team-a", "web", 3, "500m"), 2)
	assertMessages(t, "scale to 3", h.review(request{op: update, uid: "req-2", obj: v2, old: v1}))
	assertUsage(t, h, teamA, "core/requests.cpu", ledger.Usage{Limit: 1600, Reserved: 1500, Available: 100})
	assertMessages(t, "scale to 3, retried", h.review(request{op: update, uid: "req-2b", obj: v2, old: v1}))
	assertUsage(t, h, teamA, "core/requests.cpu", ledger.Usage{Limit: 1600, Reserved: 1500, Available: 100})
	v3 := atGeneration(deployment("team-a", "web", 4, "500m"), 3)
	assertMessages(t, "scale to 4", h.review(request{op: update, uid: "req-3", obj: v3, old: v2}),
		"quota exceeded for Namespace team-a: requested 500 of core/requests.cpu, available 100 of 1600 (allocated 0, reserved 1500)"+seeEffective("team-a", teamA, "core/requests.cpu"))
	assertMessages(t, "scale down", h.review(request{op: update, uid: "req-4", obj: atGeneration(v1, 3), old: v2}))
	assertUsage(t, h, teamA, "core/requests.cpu", ledger.Usage{Limit: 1600, Reserved: 1500, Available: 100})
	// The create and the growth are separate reservations of the object; the
	// growth is keyed by the generation it reaches, so a retry of the same
	// update finds it.
	b, _, err := h.store.Get(h.ctx, ledger.NewBucketKey(teamA, "core/requests.cpu", nil))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for id, r := range b.Reservations {
		got[id] = r.Amount
		if r.Object.UID != "uid-team-a-web" || r.Object.Kind != "Deployment" || r.Object.APIGroup != "apps" || r.Object.Name != "web" {
			t.Errorf("reservation %s: object %+v", id, r.Object)
		}
	}
	if want := map[string]int64{"uid-team-a-web": 1000, "uid-team-a-web/2/500": 500}; !maps.Equal(got, want) {
		t.Errorf("reservations: got %v, want %v", got, want)
	}
}

// failingStore is a ledger store whose backend is down.
type failingStore struct{}

var errStoreDown = errors.New("bucket store down")

func (failingStore) Apply(context.Context, ledger.BucketKey, func(*ledger.Bucket) error) (ledger.Bucket, error) {
	return ledger.Bucket{}, errStoreDown
}

func (failingStore) Get(context.Context, ledger.BucketKey) (ledger.Bucket, bool, error) {
	return ledger.Bucket{}, false, errStoreDown
}

func (failingStore) List(context.Context) ([]ledger.Bucket, error) { return nil, errStoreDown }

// location is where OPA says the builtin was called from (a line of the
// library); the rest of the message is asserted exactly.
var location = regexp.MustCompile(`^libs\["lib_0"\]:\d+: `)

func withoutLocation(msgs []string) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		if !location.MatchString(m) {
			out[i] = "NO LOCATION: " + m
			continue
		}
		out[i] = location.ReplaceAllString(m, "")
	}
	return out
}

// Every failure to decide must deny: the frameworks driver turns a halt into
// a violation carrying the error; an undefined builtin call would admit.
func TestFailsClosed(t *testing.T) {
	key := ledger.NewBucketKey(teamA, "core/configmaps", nil)
	_, qtyErr := resource.ParseQuantity("lots")
	for _, tc := range []struct {
		name     string
		template string
		params   map[string]any
		ledger   func(*harness) *ledger.Ledger
		req      request
		want     string
	}{
		{
			name: "no ledger", template: "quotaentity", params: perNamespace,
			ledger: func(*harness) *ledger.Ledger { return nil },
			req:    request{op: create, uid: "req-1", obj: configMap("team-a", "cm1")},
			want:   "eval_builtin_error: quota.review: quota is not ready: the plugin has not loaded the ResourceGrants yet (it decides nothing until it has; see docs/troubleshooting.md)",
		},
		{
			name: "store down at admission", template: "quotaentity", params: perNamespace,
			ledger: func(h *harness) *ledger.Ledger { return ledger.New(failingStore{}, h.grants) },
			req:    request{op: create, uid: "req-1", obj: configMap("team-a", "cm1")},
			want:   `eval_builtin_error: quota.review: reserving claim "uid-team-a-cm1": bucket store down`,
		},
		{
			name: "store down at dry run", template: "quotaentity", params: perNamespace,
			ledger: func(h *harness) *ledger.Ledger { return ledger.New(failingStore{}, h.grants) },
			req:    request{op: create, uid: "req-1", obj: configMap("team-a", "cm1"), dryRun: true},
			want:   "eval_builtin_error: quota.review: reading bucket " + key.Name() + ": bucket store down",
		},
		{
			name: "invalid dimension", template: "quotaentity",
			params: map[string]any{"resourceType": "core/configmaps", "dimensions": map[string]any{"zone": "eu west"}},
			req:    request{op: create, uid: "req-1", obj: configMap("team-a", "cm1")},
			want: `eval_builtin_error: quota.review: claim.requests[0].dimensions[zone]: invalid value "eu west": ` +
				strings.Join(validation.IsValidLabelValue("eu west"), "; "),
		},
		{
			name: "unparsable quantity", template: "quotaallocation", params: cpuPerDeployment,
			req: request{op: create, uid: "req-1", obj: deployment("team-a", "web", 1, "lots")},
			// Denied as a violation that names the object and the field,
			// not counted 0 (package podresources decodes the pod spec).
			want: `NO LOCATION: quota: cannot count Deployment "web": spec.template.spec.containers[0].resources.requests[cpu]: "lots": ` + qtyErr.Error(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.template, tc.params)
			h.grant("g", teamA, "core/configmaps", 10)
			if tc.ledger != nil {
				h.env.Ledger = tc.ledger(h)
			}
			got := h.review(tc.req)
			assertMessages(t, tc.name, withoutLocation(got), tc.want)
			// What the tenant reads (the plugin rewrites Gatekeeper's
			// response with builtins.Undecided): never OPA's text.
			for _, m := range got {
				if tenant := builtins.Undecided("[c] " + m); strings.Contains(tenant, "eval_builtin_error") {
					t.Errorf("the tenant reads %q", tenant)
				}
			}
		})
	}
}

// A halt reads, for the tenant, as the External Data twin's denial does:
// quota cannot decide, why, and what to do.
func TestHaltReadsAsUndecided(t *testing.T) {
	h := newHarness(t, "quotaentity", perNamespace)
	h.grant("g", teamA, "core/configmaps", 10)
	h.env.Ledger = ledger.New(failingStore{}, h.grants)
	got := h.review(request{op: create, uid: "req-1", obj: configMap("team-a", "cm1")})
	if len(got) != 1 {
		t.Fatalf("violations %q, want one", got)
	}
	const want = `[configmaps] quota cannot decide: reserving claim "uid-team-a-cm1": bucket store down; the request is denied and nothing was reserved. Retry in a minute; if it keeps failing, tell your platform team (docs/troubleshooting.md#quota-cannot-decide)`
	if tenant := builtins.Undecided("[configmaps] " + got[0]); tenant != want {
		t.Errorf("the tenant reads\n%s\nwant\n%s", tenant, want)
	}
}

// The library's consumer_label_key must name the same label as the Go
// function the controllers and the webhook use.
func TestConsumerLabelKeyMatchesGo(t *testing.T) {
	lib := opa.New(
		opa.Module("quota.rego", quotarego.Lib()),
		opa.Query(`x := data.lib.quota.consumer_label_key(input.group, input.kind)`),
	)
	q, err := lib.PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ group, kind string }{
		{"resourcemanager.miloapis.com", "Organization"},
		{"resourcemanager.miloapis.com", "Project"},
		{"", "Namespace"},
		{"example.com", "TeamSpace"},
	} {
		rs, err := q.Eval(context.Background(), opa.EvalInput(map[string]any{"group": c.group, "kind": c.kind}))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := rs[0].Bindings["x"], v1alpha1.ConsumerLabelKey(c.group, c.kind); got != want {
			t.Errorf("consumer_label_key(%q, %q) = %v, want %q", c.group, c.kind, got, want)
		}
	}
}
