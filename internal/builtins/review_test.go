package builtins

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

// What quota.review decides, with the ledger's answers replaced by a fake
// (fakeQuota) so that each test asserts exactly what the review asked of
// it. rego/lib/quota_test.rego tests what the library gathers for it (the
// facts), and rego's template tests run both together on a memory ledger.

// fakeQuota answers a review's reservations and reads.
type fakeQuota struct {
	// decide answers a reservation; nil grants it.
	decide func(claim map[string]any) map[string]any
	// bucket is every read's answer; nil: roomy.
	bucket map[string]any
	// over answers quota.over_limit; nil: every resource type is over.
	over func(resourceType string) bool

	claims   []map[string]any
	reads    []map[string]any
	overAsks []string
}

func (q *fakeQuota) reserve(claim map[string]any) (map[string]any, error) {
	q.claims = append(q.claims, claim)
	if q.decide == nil {
		return map[string]any{"id": claim["id"], "granted": true, "message": "granted", "requests": []any{}}, nil
	}
	return q.decide(claim), nil
}

func (q *fakeQuota) usage(query map[string]any) (map[string]any, error) {
	q.reads = append(q.reads, query)
	if q.bucket == nil {
		return roomy, nil
	}
	return q.bucket, nil
}

func (q *fakeQuota) overLimit(resourceType string) (bool, error) {
	q.overAsks = append(q.overAsks, resourceType)
	return q.over == nil || q.over(resourceType), nil
}

func bucketAt(limit, allocated, reserved, available int64) map[string]any {
	return map[string]any{
		"bucket": "core-pods-0123", "limit": limit, "allocated": allocated, "reserved": reserved, "available": available,
		"effectiveResourceGrant": "core-pods-0123",
	}
}

var (
	roomy    = bucketAt(3, 1, 0, 2)
	full     = bucketAt(3, 3, 0, 0)
	overFull = bucketAt(3, 4, 1, 0)
)

// refusedWith refuses a claim's first request with the bucket's numbers and
// units, worded as the ledger words it.
func refusedWith(limit, allocated, reserved, available int64, units map[string]any, erg string) func(map[string]any) map[string]any {
	return func(claim map[string]any) map[string]any {
		req := claim["requests"].([]any)[0].(map[string]any)
		amount, _ := req["amount"].(json.Number).Int64()
		msg := "requested " + string(req["amount"].(json.Number)) + " of " + req["resourceType"].(string) + ", available " +
			itoa(available) + " of " + itoa(limit) + " (allocated " + itoa(allocated) + ", reserved " + itoa(reserved) + ")"
		return map[string]any{"id": claim["id"], "granted": false, "message": msg, "requests": []any{map[string]any{
			"consumer": req["consumer"], "resourceType": req["resourceType"], "dimensions": req["dimensions"], "amount": amount,
			"bucket": "core-pods-0123", "granted": false, "reason": "QuotaExceeded",
			"limit": limit, "allocated": allocated, "reserved": reserved, "available": available, "message": msg,
			"units": units, "effectiveResourceGrant": erg,
		}}}
	}
}

var refused = refusedWith(3, 2, 1, 0, map[string]any{"baseUnit": "pods", "unitConversionFactor": int64(1)}, "core-pods-0123")

// echo refuses with the claim's id and first amount as its message, so a
// test reads what was reserved.
func echo(claim map[string]any) map[string]any {
	req := claim["requests"].([]any)[0].(map[string]any)
	msg := "reserved " + claim["id"].(string) + " " + string(req["amount"].(json.Number))
	return map[string]any{"id": claim["id"], "granted": false, "message": "", "requests": []any{map[string]any{
		"consumer": req["consumer"], "resourceType": req["resourceType"], "dimensions": req["dimensions"],
		"reason": "QuotaExceeded", "message": msg, "limit": int64(0), "allocated": int64(0), "reserved": int64(0), "available": int64(0),
	}}}
}

func itoa(n int64) string { return string(json.Number(jsonNumber(n))) }

func jsonNumber(n int64) string { b, _ := json.Marshal(n); return string(b) }

// facts is what lib.quota gives quota.review for a Pod p1 (uid-1) in
// team-a (and, under amount, oldAmount, claim or growth, what it counts:
// decided hands those over as the second argument); with changes them.
type facts map[string]any

func podFacts(op, requestUID string, params map[string]any) facts {
	return facts{
		"operation": op, "requestUID": requestUID, "dryRun": false,
		"kind":      map[string]any{"apiGroup": "", "kind": "Pod"},
		"object":    map[string]any{"name": "p1", "namespace": "team-a", "uid": "uid-1"},
		"oldLabels": map[string]any{}, "namespace": "team-a", "namespaceLabels": nil, "reviewNamespace": "team-a", "reviewName": "p1",
		"parameters": params,
	}
}

func (f facts) with(kv ...any) facts {
	out := facts{}
	for k, v := range f {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func (f facts) without(key string) facts {
	out := f.with()
	delete(out, key)
	return out
}

var (
	pods  = map[string]any{"resourceType": "core/pods"}
	byOrg = map[string]any{"resourceType": "core/pods", "consumers": []any{map[string]any{"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization"}}}
	acme  = map[string]any{"resourcemanager.miloapis.com/organization": "acme"}
)

// decided runs quota.review on f with amount (and oldAmount) against q and
// returns the violations.
func decided(t *testing.T, f facts, q quotaReader) []any {
	t.Helper()
	if _, ok := f["claim"]; !ok {
		if _, ok := f["growth"]; !ok {
			if _, ok := f["amount"]; !ok {
				f = f.with("amount", 1, "oldAmount", 1)
			}
		}
	}
	counts := facts{}
	for _, k := range []string{"amount", "oldAmount", "claim", "growth"} {
		if v, ok := f[k]; ok {
			counts[k] = v
			f = f.without(k)
		}
	}
	r, err := newReviewer(q, viaJSON(t, f), viaJSON(t, counts))
	if err != nil {
		t.Fatalf("newReviewer: %v", err)
	}
	vs, err := r.violations()
	if err != nil {
		t.Fatalf("violations: %v", err)
	}
	return vs
}

// viaJSON is v as OPA hands an argument over: numbers as json.Number.
func viaJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func messages(t *testing.T, f facts, q quotaReader) []string {
	t.Helper()
	var out []string
	for _, v := range decided(t, f, q) {
		out = append(out, v.(map[string]any)["msg"].(string))
	}
	slices.Sort(out)
	return out
}

func requireMessages(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("violations\n got %q\nwant %q", got, want)
	}
}

// asJSON compares as JSON (numbers of any Go type alike).
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReviewClaimForACreate(t *testing.T) {
	q := &fakeQuota{}
	requireMessages(t, messages(t, podFacts("CREATE", "req-1", pods), q))
	want := `{"id":"uid-1","object":{"apiGroup":"","kind":"Pod","name":"p1","namespace":"team-a","uid":"uid-1"},` +
		`"policyVersion":"","requests":[{"amount":1,"consumer":{"apiGroup":"","kind":"Namespace","name":"team-a","namespace":""},` +
		`"dimensions":{},"resourceType":"core/pods","total":0}]}`
	if len(q.claims) != 1 || asJSON(t, q.claims[0]) != want {
		t.Fatalf("claims\n got %s\nwant [%s]", asJSON(t, q.claims), want)
	}
}

// The constraint's policy version travels with every claim: the ledger
// denies while the observer has not counted under it; a view is asked for
// only with parameters.claimViews.
func TestReviewClaimCarriesThePolicyVersionAndAViewOnlyWhenAsked(t *testing.T) {
	q := &fakeQuota{}
	decided(t, podFacts("CREATE", "req-1", map[string]any{"resourceType": "core/pods", "policyVersion": "QuotaEntity/pods/0123456789abcdef"}), q)
	decided(t, podFacts("CREATE", "req-1", map[string]any{"resourceType": "core/pods", "claimViews": true}), q)
	if got := q.claims[0]["policyVersion"]; got != "QuotaEntity/pods/0123456789abcdef" {
		t.Fatalf("policyVersion %v", got)
	}
	if _, ok := q.claims[0]["metadata"]; ok {
		t.Fatalf("a view was asked for without parameters.claimViews: %v", q.claims[0])
	}
	if got := asJSON(t, q.claims[1]["metadata"]); got != "{}" {
		t.Fatalf("metadata with claimViews: %s, want {}", got)
	}
}

// An UPDATE reserves its growth under <uid>/<generation>/<growth>: the same
// for a retried request, another for another growth (a rejected update
// never persists its generation), generation 0 for a kind without one.
func TestReviewClaimIDOfAnUpdate(t *testing.T) {
	at7 := map[string]any{"name": "p1", "namespace": "team-a", "uid": "uid-1", "generation": 7}
	cases := []struct {
		request     string
		object      map[string]any
		amount, old int
		want        string
	}{
		{"req-7", at7, 600, 100, "uid-1/7/500"},
		{"req-8", at7, 600, 100, "uid-1/7/500"},
		{"req-9", at7, 1600, 100, "uid-1/7/1500"},
		{"req-7", map[string]any{"name": "p1", "namespace": "team-a", "uid": "uid-1"}, 1, 0, "uid-1/0/1"},
	}
	for _, c := range cases {
		q := &fakeQuota{}
		decided(t, podFacts("UPDATE", c.request, pods).with("object", c.object, "amount", c.amount, "oldAmount", c.old), q)
		if len(q.claims) != 1 || q.claims[0]["id"] != c.want {
			t.Errorf("%s %d->%d: claims %s, want id %s", c.request, c.old, c.amount, asJSON(t, q.claims), c.want)
		}
		if total := q.claims[0]["requests"].([]any)[0].(map[string]any)["total"]; asJSON(t, total) != jsonNumber(int64(c.amount)) {
			t.Errorf("total %v, want %d", total, c.amount)
		}
	}
}

func TestReviewOneRequestPerConsumerInOrder(t *testing.T) {
	params := map[string]any{
		"resourceType": "core/pods",
		"dimensions":   map[string]any{"tier": "gold"},
		"consumers": []any{
			map[string]any{"apiGroup": "resourcemanager.miloapis.com", "kind": "Project", "resourceType": "core/pods-per-project"},
			map[string]any{"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization", "dimensions": map[string]any{"region": "eu"}},
		},
	}
	labels := map[string]any{"resourcemanager.miloapis.com/project": "web", "resourcemanager.miloapis.com/organization": "acme"}
	q := &fakeQuota{}
	decided(t, podFacts("CREATE", "req-1", params).with("namespaceLabels", labels), q)
	want := `[{"amount":1,"consumer":{"apiGroup":"resourcemanager.miloapis.com","kind":"Project","name":"web","namespace":""},"dimensions":{"tier":"gold"},"resourceType":"core/pods-per-project","total":0},` +
		`{"amount":1,"consumer":{"apiGroup":"resourcemanager.miloapis.com","kind":"Organization","name":"acme","namespace":""},"dimensions":{"region":"eu","tier":"gold"},"resourceType":"core/pods","total":0}]`
	if got := asJSON(t, q.claims[0]["requests"]); got != want {
		t.Fatalf("requests\n got %s\nwant %s", got, want)
	}
}

func TestReviewConsumers(t *testing.T) {
	consumer := func(f facts) string {
		q := &fakeQuota{}
		requireMessages(t, messages(t, f, q))
		return asJSON(t, q.claims[0]["requests"].([]any)[0].(map[string]any)["consumer"])
	}
	org := func(name string) string {
		return `{"apiGroup":"resourcemanager.miloapis.com","kind":"Organization","name":"` + name + `","namespace":""}`
	}
	fixed := map[string]any{"resourceType": "core/pods", "consumers": []any{map[string]any{"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization", "name": "globex"}}}
	if got := consumer(podFacts("CREATE", "req-1", fixed)); got != org("globex") {
		t.Errorf("fixed name: %s", got)
	}
	if got := consumer(podFacts("CREATE", "req-1", pods)); got != `{"apiGroup":"","kind":"Namespace","name":"team-a","namespace":""}` {
		t.Errorf("the namespace: %s", got)
	}
	if got := consumer(podFacts("CREATE", "req-1", byOrg).with("namespaceLabels", acme)); got != org("acme") {
		t.Errorf("from the namespace's label: %s", got)
	}
	override := map[string]any{"resourceType": "core/pods", "consumers": []any{map[string]any{"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization", "labelKey": "example.com/org"}}}
	if got := consumer(podFacts("CREATE", "req-1", override).with("namespaceLabels", map[string]any{"example.com/org": "acme"})); got != org("acme") {
		t.Errorf("labelKey: %s", got)
	}
}

// Every configuration problem denies, and nothing is reserved.
func TestReviewConfigurationErrorsDenyWithoutReserving(t *testing.T) {
	clusterRole := func(params map[string]any) facts {
		return podFacts("CREATE", "req-1", params).with(
			"kind", map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole"},
			"object", map[string]any{"name": "admin2", "uid": "uid-cr"}, "namespace", "", "reviewNamespace", "", "reviewName", "admin2")
	}
	cases := []struct {
		name  string
		facts facts
		want  string
	}{
		{"no label", podFacts("CREATE", "req-1", byOrg).with("namespaceLabels", map[string]any{}),
			`quota: cannot find the Organization of namespace "team-a": it has no label "resourcemanager.miloapis.com/organization"`},
		{"unsynced namespace", podFacts("CREATE", "req-1", byOrg),
			`quota: cannot find the Organization of namespace "team-a": the namespace is not in Gatekeeper's synced inventory (sync v1 Namespace)`},
		{"cluster-scoped, namespace consumer", clusterRole(pods), `quota: cannot count ClusterRole "admin2" against a namespace: it is cluster-scoped`},
		{"cluster-scoped, labelled consumer", clusterRole(byOrg),
			`quota: cannot find the Organization of ClusterRole "admin2": it is cluster-scoped, so no namespace label "resourcemanager.miloapis.com/organization" names one`},
		{"no consumers", podFacts("CREATE", "req-1", map[string]any{"resourceType": "core/pods", "consumers": []any{}}), "quota: parameters.consumers: must not be empty"},
		{"no resource type", podFacts("CREATE", "req-1", map[string]any{}), "quota: parameters.resourceType: required (or parameters.consumers[0].resourceType)"},
		{"entry not an object", podFacts("CREATE", "req-1", map[string]any{"resourceType": "core/pods", "consumers": []any{"Namespace"}}), "quota: parameters.consumers[0]: must be an object"},
		{"entry without a kind", podFacts("CREATE", "req-1", map[string]any{"resourceType": "core/pods", "consumers": []any{map[string]any{"name": "x"}}}), "quota: parameters.consumers[0].kind: required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := &fakeQuota{decide: echo}
			requireMessages(t, messages(t, c.facts, q), c.want)
			if len(q.claims) != 0 || len(q.reads) != 0 {
				t.Fatalf("asked the ledger: claims %v reads %v", q.claims, q.reads)
			}
		})
	}
}

func TestReviewRefusedReservationIsOneViolationWithTheNumbers(t *testing.T) {
	vs := decided(t, podFacts("CREATE", "req-1", pods), &fakeQuota{decide: refused})
	want := `[{"details":{"allocated":2,"available":0,"bucket":"core-pods-0123","consumer":{"apiGroup":"","kind":"Namespace","name":"team-a","namespace":""},` +
		`"dimensions":{},"limit":3,"requested":1,"reserved":1,"resourceType":"core/pods"},` +
		`"msg":"quota exceeded for Namespace team-a: requested 1 of core/pods, available 0 of 3 (allocated 2, reserved 1); see EffectiveResourceGrant team-a/core-pods-0123 (kubectl quota usage -n team-a)"}]`
	if got := asJSON(t, vs); got != want {
		t.Fatalf("violations\n got %s\nwant %s", got, want)
	}
	dims := map[string]any{"resourceType": "core/pods", "dimensions": map[string]any{"zone": "b", "tier": "gold"}}
	requireMessages(t, messages(t, podFacts("CREATE", "req-1", dims), &fakeQuota{decide: refused}),
		"quota exceeded for Namespace team-a {tier=gold,zone=b}: requested 1 of core/pods, available 0 of 3 (allocated 2, reserved 1); see EffectiveResourceGrant team-a/core-pods-0123 (kubectl quota usage -n team-a)")
	requireMessages(t, messages(t, podFacts("CREATE", "req-1", pods), &fakeQuota{bucket: full}))
}

// A refusal for another reason than the bucket's limit (a recount) is the
// ledger's message.
func TestReviewRefusalWithoutAnExceededBucketIsTheLedgersMessage(t *testing.T) {
	recounting := func(claim map[string]any) map[string]any {
		return map[string]any{"id": claim["id"], "granted": false, "message": "quota for core/pods is being recounted", "requests": []any{
			map[string]any{"reason": ReasonRecounting, "message": "quota for core/pods is being recounted"},
		}}
	}
	requireMessages(t, messages(t, podFacts("CREATE", "req-1", pods), &fakeQuota{decide: recounting}), "quota denied: quota for core/pods is being recounted")
}

func TestReviewDenialShowsTheDisplayUnitExactly(t *testing.T) {
	cores := map[string]any{"baseUnit": "millicores", "displayUnit": "cores", "unitConversionFactor": int64(1000)}
	dozens := map[string]any{"baseUnit": "eggs", "displayUnit": "dozens", "unitConversionFactor": int64(12)}
	same := map[string]any{"baseUnit": "pods", "displayUnit": "pods", "unitConversionFactor": int64(1)}
	create := func(amount int) facts {
		return podFacts("CREATE", "req-1", pods).with("amount", amount, "oldAmount", 0)
	}
	requireMessages(t, messages(t, create(500), &fakeQuota{decide: refusedWith(8000, 7500, 500, 0, cores, "e")}),
		"quota exceeded for Namespace team-a: requested 500 of core/pods, available 0 of 8000 (allocated 7500, reserved 500); in cores (1000 millicores each): requested 0.5, available 0 of 8 (allocated 7.5, reserved 0.5); see EffectiveResourceGrant team-a/e (kubectl quota usage -n team-a)")
	// 7 eggs is 7/12 of a dozen: no finite decimal, so the exact fraction.
	requireMessages(t, messages(t, create(7), &fakeQuota{decide: refusedWith(40, 30, 4, 6, dozens, "e")}),
		"quota exceeded for Namespace team-a: requested 7 of core/pods, available 6 of 40 (allocated 30, reserved 4); in dozens (12 eggs each): requested 7/12, available 0.5 of 10/3 (allocated 2.5, reserved 1/3); see EffectiveResourceGrant team-a/e (kubectl quota usage -n team-a)")
	// A display unit that is the base unit adds nothing.
	requireMessages(t, messages(t, create(1), &fakeQuota{decide: refusedWith(3, 3, 0, 0, same, "e")}),
		"quota exceeded for Namespace team-a: requested 1 of core/pods, available 0 of 3 (allocated 3, reserved 0); see EffectiveResourceGrant team-a/e (kubectl quota usage -n team-a)")
}

// Where a denial points: the consumer's EffectiveResourceGrant in the
// object's namespace when the namespace belongs to it, else the whole
// cluster's table (a Namespace being created has none yet; a consumer named
// in the parameters may live elsewhere).
func TestReviewDenialPointsToWhereTheTenantReadsTheNumbers(t *testing.T) {
	namespace := podFacts("CREATE", "req-1", byOrg).with(
		"kind", map[string]any{"apiGroup": "", "kind": "Namespace"},
		"object", map[string]any{"name": "team-z", "uid": "uid-ns"}, "namespace", "team-z", "namespaceLabels", acme)
	requireMessages(t, messages(t, namespace, &fakeQuota{decide: refused}),
		"quota exceeded for Organization acme: requested 1 of core/pods, available 0 of 3 (allocated 2, reserved 1); see kubectl quota usage -A")
	globex := map[string]any{"resourceType": "core/pods", "consumers": []any{map[string]any{"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization", "name": "globex"}}}
	requireMessages(t, messages(t, podFacts("CREATE", "req-1", globex).with("namespaceLabels", acme), &fakeQuota{decide: refused}),
		"quota exceeded for Organization globex: requested 1 of core/pods, available 0 of 3 (allocated 2, reserved 1); see kubectl quota usage -A")
	requireMessages(t, messages(t, podFacts("CREATE", "req-1", byOrg).with("namespaceLabels", acme), &fakeQuota{decide: refused}),
		"quota exceeded for Organization acme: requested 1 of core/pods, available 0 of 3 (allocated 2, reserved 1); see EffectiveResourceGrant team-a/core-pods-0123 (kubectl quota usage -n team-a)")
}

func TestReviewAudit(t *testing.T) {
	audit := podFacts("", "", pods)
	q := &fakeQuota{decide: refused, bucket: overFull}
	requireMessages(t, messages(t, audit, q), "Namespace team-a is over its quota of core/pods: allocated 4, reserved 1, limit 3")
	if len(q.claims) != 0 {
		t.Fatalf("audit reserved: %v", q.claims)
	}
	// No bucket of the resource type over its limit (the index): no bucket is read.
	q = &fakeQuota{bucket: overFull, over: func(string) bool { return false }}
	requireMessages(t, messages(t, audit, q))
	if len(q.reads) != 0 {
		t.Fatalf("read buckets %v with none over", q.reads)
	}
	// Asked of each consumer's resource type; one over is enough.
	two := map[string]any{"consumers": []any{
		map[string]any{"kind": "Namespace", "resourceType": "core/pods"}, map[string]any{"kind": "Namespace", "resourceType": "core/services"},
	}}
	q = &fakeQuota{bucket: overFull, over: func(rt string) bool { return rt == "core/services" }}
	requireMessages(t, messages(t, podFacts("", "", two), q),
		"Namespace team-a is over its quota of core/pods: allocated 4, reserved 1, limit 3",
		"Namespace team-a is over its quota of core/services: allocated 4, reserved 1, limit 3")
	if !slices.Equal(q.overAsks, []string{"core/pods", "core/services"}) {
		t.Fatalf("over_limit asked of %v", q.overAsks)
	}
	// Configuration errors whatever the buckets say; the report can be turned off.
	requireMessages(t, messages(t, podFacts("", "", map[string]any{"consumers": []any{}}), &fakeQuota{over: func(string) bool { return false }}),
		"quota: parameters.consumers: must not be empty")
	requireMessages(t, messages(t, podFacts("", "", map[string]any{"resourceType": "core/pods", "reportOverLimit": false}), &fakeQuota{bucket: overFull}))
}

// A dry run and an admission without a request uid read and predict the
// real request's denial; they never reserve.
func TestReviewChecksNeverReserve(t *testing.T) {
	dry := podFacts("CREATE", "req-1", pods).with("dryRun", true)
	q := &fakeQuota{decide: refused}
	requireMessages(t, messages(t, dry, q))
	requireMessages(t, messages(t, dry, &fakeQuota{bucket: full}),
		"quota exceeded for Namespace team-a: requested 1 of core/pods, available 0 of 3 (allocated 3, reserved 0); see EffectiveResourceGrant team-a/core-pods-0123 (kubectl quota usage -n team-a)")
	requireMessages(t, messages(t, podFacts("CREATE", "", pods), q))
	if len(q.claims) != 0 {
		t.Fatalf("reserved: %v", q.claims)
	}
}

func TestReviewUpdatesAndCreatesOfNothing(t *testing.T) {
	at2 := map[string]any{"name": "p1", "namespace": "team-a", "uid": "uid-1", "generation": 2}
	requireMessages(t, messages(t, podFacts("UPDATE", "req-2", pods).with("object", at2, "amount", 5, "oldAmount", 3), &fakeQuota{decide: echo}),
		"quota exceeded for Namespace team-a: reserved uid-1/2/2 2; see kubectl quota usage -n team-a")
	for _, c := range []struct {
		op          string
		amount, old int
	}{{"UPDATE", 3, 3}, {"UPDATE", 2, 3}, {"CREATE", 0, 0}, {"DELETE", 1, 1}} {
		q := &fakeQuota{decide: echo, bucket: full}
		requireMessages(t, messages(t, podFacts(c.op, "req-2", pods).with("amount", c.amount, "oldAmount", c.old), q))
		if len(q.claims)+len(q.reads) != 0 {
			t.Errorf("%s %d->%d asked the ledger", c.op, c.old, c.amount)
		}
	}
}

func TestReviewDeniesWhatItCannotCount(t *testing.T) {
	requireMessages(t, messages(t, podFacts("CREATE", "req-1", pods).with("object", map[string]any{"name": "p1", "namespace": "team-a", "uid": ""}), &fakeQuota{}),
		`quota: cannot reserve for Pod "p1": metadata.uid is empty (the API server sets it before validating admission)`)
	for amount, want := range map[any]string{
		1.5:                              "the amount must be a whole number, got 1.5",
		"quota cannot decide: no answer": "quota cannot decide: no answer",
		`{"error":"parameters.amount: set path or resource"}`: "parameters.amount: set path or resource",
	} {
		if s, ok := amount.(string); ok && s[0] == '{' {
			var m map[string]any
			_ = json.Unmarshal([]byte(s), &m)
			amount = any(m)
		}
		q := &fakeQuota{}
		requireMessages(t, messages(t, podFacts("CREATE", "req-1", pods).with("amount", amount, "oldAmount", 0), q), `quota: cannot count Pod "p1": `+want)
		if len(q.claims) != 0 {
			t.Fatalf("reserved %v", q.claims)
		}
	}
}

// parameters.labelSelector: an update that labels an object into scope is
// charged its whole amount, like a create; out of scope counts nothing.
func TestReviewLabelSelectorBeforeAndAfterAnUpdate(t *testing.T) {
	scoped := map[string]any{"resourceType": "core/pods", "labelSelector": map[string]any{"matchLabels": map[string]any{"quota": "counted"}}}
	in := map[string]any{"name": "p1", "namespace": "team-a", "uid": "uid-1", "labels": map[string]any{"quota": "counted"}}
	q := &fakeQuota{decide: echo}
	requireMessages(t, messages(t, podFacts("UPDATE", "req-1", scoped).with("object", in), q),
		"quota exceeded for Namespace team-a: reserved uid-1/0/1 1; see kubectl quota usage -n team-a")
	for _, f := range []facts{
		podFacts("UPDATE", "req-1", scoped).with("object", in, "oldLabels", map[string]any{"quota": "counted"}),
		podFacts("UPDATE", "req-1", scoped),
		podFacts("CREATE", "req-1", scoped),
	} {
		requireMessages(t, messages(t, f, &fakeQuota{decide: echo}))
	}
}

// A template that states its claim (QuotaClaimPolicy): a CREATE reserves the
// requests under the object's uid; an UPDATE the growth per bucket under
// <uid>/<generation>/<growth>.
func TestReviewStatedClaims(t *testing.T) {
	org := map[string]any{"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization", "name": "acme", "namespace": ""}
	req := func(rt string, amount int) map[string]any {
		return map[string]any{"consumer": org, "resourceType": rt, "amount": amount, "dimensions": map[string]any{}}
	}
	q := &fakeQuota{}
	md := map[string]any{"name": "view"}
	requireMessages(t, messages(t, podFacts("CREATE", "req-1", nil).with("claim", map[string]any{"requests": []any{req("cpu", 2), req("mem", 3)}, "metadata": md}), q))
	if got := asJSON(t, q.claims); got != `[{"id":"uid-1","metadata":{"name":"view"},"object":{"apiGroup":"","kind":"Pod","name":"p1","namespace":"team-a","uid":"uid-1"},"policyVersion":"",`+
		`"requests":[{"amount":2,"consumer":{"apiGroup":"resourcemanager.miloapis.com","kind":"Organization","name":"acme","namespace":""},"dimensions":{},"resourceType":"cpu"},`+
		`{"amount":3,"consumer":{"apiGroup":"resourcemanager.miloapis.com","kind":"Organization","name":"acme","namespace":""},"dimensions":{},"resourceType":"mem"}]}]` {
		t.Fatalf("claim %s", got)
	}
	q = &fakeQuota{}
	at4 := map[string]any{"name": "p1", "namespace": "team-a", "uid": "uid-1", "generation": 4}
	growth := map[string]any{"requests": []any{req("cpu", 2), req("cpu", 3), req("mem", 1)}, "oldRequests": []any{req("cpu", 1), req("mem", 1)}, "metadata": map[string]any{}}
	requireMessages(t, messages(t, podFacts("UPDATE", "req-2", nil).with("object", at4, "growth", growth), q))
	if got := asJSON(t, q.claims); got != `[{"id":"uid-1/4/4","metadata":{},"object":{"apiGroup":"","kind":"Pod","name":"p1","namespace":"team-a","uid":"uid-1"},"policyVersion":"",`+
		`"requests":[{"amount":4,"consumer":{"apiGroup":"resourcemanager.miloapis.com","kind":"Organization","name":"acme","namespace":""},"dimensions":{},"resourceType":"cpu","total":5}]}]` {
		t.Fatalf("growth claim %s", got)
	}
	// A dry run checks the same buckets; nothing grows, nothing is asked.
	q = &fakeQuota{bucket: full}
	requireMessages(t, messages(t, podFacts("UPDATE", "", nil).with("object", at4, "growth", growth), q),
		"quota exceeded for Organization acme: requested 4 of cpu, available 0 of 3 (allocated 3, reserved 0); see kubectl quota usage -A")
	q = &fakeQuota{}
	requireMessages(t, messages(t, podFacts("UPDATE", "req-2", nil).with("growth", map[string]any{"requests": []any{req("cpu", 1)}, "oldRequests": []any{req("cpu", 2)}, "metadata": map[string]any{}}), q))
	if len(q.claims)+len(q.reads) != 0 {
		t.Fatalf("a shrinking update asked the ledger")
	}
}

// The numbers of a decision reach details unchanged (the wrapper's shape).
func TestReviewDetailsKeepTheLedgersNumbers(t *testing.T) {
	vs := decided(t, podFacts("CREATE", "", pods), &fakeQuota{bucket: full})
	got := vs[0].(map[string]any)["details"]
	want := map[string]any{
		"consumer": map[string]any{"apiGroup": "", "kind": "Namespace", "name": "team-a", "namespace": ""}, "resourceType": "core/pods",
		"dimensions": map[string]any{}, "requested": json.Number("1"), "limit": int64(3), "allocated": int64(3), "reserved": int64(0),
		"available": int64(0), "bucket": "core-pods-0123",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("details\n got %#v\nwant %#v", got, want)
	}
}
