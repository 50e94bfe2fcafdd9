package builtins

// quota.review: what lib.quota decides for one review, in Go. The shipped
// templates' Rego passes the review and the parameters, with the facts only
// it can read (a Scale's workload and the namespace's labels from
// Gatekeeper's inventory), and calls quota.review once (reviewfacts.go reads
// the argument). The consumers' scopes, the mode, the claim, the
// reservation or the read, and every message are decided here, the same in
// Gatekeeper, in the External Data provider and in the observer (which
// evaluates the same templates in observe mode), without OPA evaluating
// them rule by rule for every object (issue 23: about half of Gatekeeper's
// and the manager's CPU per create was that evaluation).

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// ReviewName decides one review's quota: the violations of lib.quota.
const ReviewName = "quota.review"

// The modes of a review (lib.quota's mode).
const (
	// modeReserve is a real admission: quota.reserve, keyed by the object's uid.
	modeReserve = "reserve"
	// modeCheck is a dry run, or an admission without a request uid: read only,
	// with the verdict and message a real request would get.
	modeCheck = "check"
	// modeAudit has no operation (Gatekeeper's audit): read only, it reports
	// consumers above their limit.
	modeAudit = "audit"
	// modeNone is DELETE and CONNECT: the observer returns quota, not admission.
	modeNone = "none"
)

// review implements quota.review(facts, counts).
func review(env *Env, bctx rego.BuiltinContext, factsTerm, countsTerm *ast.Term) (*ast.Term, error) {
	facts, err := reviewFacts(factsTerm)
	if err != nil {
		return nil, err
	}
	counts, err := toJSON("counts", countsTerm)
	if err != nil {
		return nil, err
	}
	r, err := newReviewer(envQuota{env: env, bctx: bctx}, facts, counts)
	if err != nil {
		return nil, err
	}
	vs, err := r.violations()
	if err != nil {
		return nil, err
	}
	if vs == nil {
		vs = []any{} // an array, as declared, in both admission modes
	}
	return toTerm(vs)
}

// quotaReader is what a review asks of the ledger: quota.reserve,
// quota.usage and quota.over_limit, on JSON values.
type quotaReader interface {
	reserve(claim map[string]any) (map[string]any, error)
	usage(query map[string]any) (map[string]any, error)
	overLimit(resourceType string) (bool, error)
}

// envQuota answers a review as the builtins answer Rego: against env, in
// the evaluation's mode (admission or observe).
type envQuota struct {
	env  *Env
	bctx rego.BuiltinContext
}

func (q envQuota) reserve(claim map[string]any) (map[string]any, error) {
	return reserveClaim(q.env, q.bctx, claim)
}

func (q envQuota) usage(query map[string]any) (map[string]any, error) {
	return bucketUsage(q.env, q.bctx, query)
}

func (q envQuota) overLimit(resourceType string) (bool, error) {
	return anyOverLimit(q.env, q.bctx, resourceType)
}

// reviewer decides one quota.review call.
type reviewer struct {
	quota quotaReader
	// facts is what reviewFacts reads of the first argument; counts the
	// second: what the object counts.
	facts, counts map[string]any
	params        map[string]any
	// meta is the reviewed object's metadata (uid, name, namespace,
	// generation, labels): the workload itself for a Scale.
	meta      map[string]any
	operation string
	mode      string
	// namespace is the namespace the object counts against; labels its
	// labels, known only when labelsKnown.
	namespace   string
	labels      map[string]any
	labelsKnown bool
}

func newReviewer(quota quotaReader, facts, counts any) (*reviewer, error) {
	var d decoder
	f := d.object("facts", facts, "operation", "requestUID", "dryRun", "kind", "object", "oldLabels",
		"namespace", "namespaceLabels", "reviewNamespace", "reviewName", "parameters")
	c := d.object("counts", counts, "amount", "oldAmount", "claim", "growth")
	if f == nil || c == nil {
		return nil, d.err()
	}
	r := &reviewer{quota: quota, facts: f, counts: c}
	r.params, _ = f["parameters"].(map[string]any)
	r.meta, _ = f["object"].(map[string]any)
	r.operation = d.str("facts", f, "operation")
	r.namespace = d.str("facts", f, "namespace")
	// null (or absent) when Gatekeeper does not know the namespace.
	r.labels, r.labelsKnown = f["namespaceLabels"].(map[string]any)
	if err := d.err(); err != nil {
		return nil, err
	}
	admission := r.operation == "CREATE" || r.operation == "UPDATE"
	switch {
	case admission && f["requestUID"] != "" && f["requestUID"] != nil && f["dryRun"] != true:
		r.mode = modeReserve
	case admission:
		r.mode = modeCheck
	case r.operation == "":
		r.mode = modeAudit
	default:
		r.mode = modeNone
	}
	return r, nil
}

// violations is lib.quota's violations (amount and oldAmount),
// claim_violations (claim) or growth_violations (growth): the {msg,
// details} of the review, none when it may proceed.
func (r *reviewer) violations() ([]any, error) {
	if c, ok := r.counts["claim"]; ok {
		return r.claimViolations(c)
	}
	if g, ok := r.counts["growth"]; ok {
		return r.growthViolations(g)
	}
	return r.amountViolations(r.counts["amount"], r.counts["oldAmount"])
}

// amountViolations is for an object that asks for amount (oldAmount
// before an UPDATE) against every consumer of parameters.consumers.
func (r *reviewer) amountViolations(amount, oldAmount any) ([]any, error) {
	in, err := r.inScope(r.meta["labels"])
	if err != nil || !in {
		return nil, err
	}
	switch r.mode {
	case modeReserve, modeCheck:
	case modeAudit:
		return r.auditViolations()
	default:
		return nil, nil
	}
	// What the object counted before an UPDATE: nothing when it was out of
	// scope (an update that labels it into scope is charged like a create).
	oldIn, err := r.inScope(r.facts["oldLabels"])
	if err != nil {
		return nil, err
	}
	if !oldIn {
		oldAmount = json.Number("0")
	}
	n, total := amount, any(json.Number("0"))
	if r.operation == "UPDATE" {
		n = growth(amount, oldAmount)
		if _, ok := number(amount); ok {
			total = amount
		}
	}
	return r.admissionViolations(n, total)
}

// inScope applies parameters.labelSelector to an object's labels; an
// object out of scope counts nothing, at admission and in the observer.
func (r *reviewer) inScope(labels any) (bool, error) {
	sel, ok := r.params["labelSelector"]
	if !ok || sel == false {
		return true, nil
	}
	if labels == nil {
		labels = map[string]any{}
	}
	return selectorSelects(sel, labels)
}

// growth is what an UPDATE asks for: the new amount less the old; an amount
// that is not a number is passed on, to be denied with its reason.
func growth(amount, oldAmount any) any {
	a, aok := number(amount)
	o, ook := number(oldAmount)
	switch {
	case aok && ook:
		return ratNumber(new(big.Rat).Sub(a, o))
	case !aok:
		return amount
	}
	return oldAmount
}

func (r *reviewer) admissionViolations(n, total any) ([]any, error) {
	v, ok := number(n)
	if !ok || !v.IsInt() {
		return r.amountViolation(n), nil
	}
	if v.Sign() <= 0 {
		return nil, nil
	}
	scopes, errs := r.scopes()
	if len(errs) > 0 {
		return configViolations(errs), nil
	}
	if r.mode == modeCheck {
		return r.checkViolations(requests(scopes, n, nil))
	}
	if r.objectUID() == "" {
		return r.uidViolation(), nil
	}
	claim := map[string]any{
		"id":            r.claimID(n),
		"object":        r.objectRef(),
		"requests":      requests(scopes, n, total),
		"policyVersion": get(r.params, "policyVersion", ""),
	}
	// A claim with a metadata field has a ResourceClaim view per consumer
	// (written by the manager's observer): only with parameters.claimViews,
	// since each view costs two API writes per object.
	if r.params["claimViews"] == true {
		claim["metadata"] = map[string]any{}
	}
	return r.reserved(claim)
}

// claimViolations is for a template that states its claim itself
// (QuotaClaimPolicy: what a ClaimCreationPolicy renders): only a CREATE
// claims, the requests all or nothing under the object's uid; audit reports
// their buckets when over their limit.
func (r *reviewer) claimViolations(v any) ([]any, error) {
	var d decoder
	c := d.object("counts.claim", v, "requests", "metadata")
	if c == nil {
		return nil, d.err()
	}
	reqs, _ := c["requests"].([]any)
	if len(reqs) == 0 {
		return nil, nil
	}
	switch {
	case r.mode == modeReserve && r.operation == "CREATE":
		if r.objectUID() == "" {
			return r.uidViolation(), nil
		}
		return r.reserved(map[string]any{
			"id":            r.meta["uid"],
			"object":        r.objectRef(),
			"requests":      reqs,
			"metadata":      c["metadata"],
			"policyVersion": get(r.params, "policyVersion", ""),
		})
	case r.mode == modeCheck && r.operation == "CREATE":
		return r.checkViolations(reqs)
	case r.mode == modeAudit:
		return r.auditBuckets(reqs)
	}
	return nil, nil
}

// growthViolations is for an UPDATE of an object whose template states its
// claim (QuotaClaimPolicy): one request per bucket whose amount grows from
// the old requests to the new, reserved as one claim under
// `<uid>/<generation>/<growth>` (the growth summed over the buckets).
func (r *reviewer) growthViolations(v any) ([]any, error) {
	var d decoder
	g := d.object("counts.growth", v, "requests", "oldRequests", "metadata")
	if g == nil {
		return nil, d.err()
	}
	newReqs, _ := g["requests"].([]any)
	oldReqs, _ := g["oldRequests"].([]any)
	buckets, err := bucketAmounts(newReqs)
	if err != nil {
		return nil, err
	}
	old, err := bucketAmounts(oldReqs)
	if err != nil {
		return nil, err
	}
	var reqs []any
	sum := new(big.Rat)
	for _, b := range buckets {
		o := new(big.Rat)
		if ob, ok := old.find(b.query); ok {
			o = ob.amount
		}
		if b.amount.Cmp(o) <= 0 {
			continue
		}
		grown := new(big.Rat).Sub(b.amount, o)
		sum.Add(sum, grown)
		req := maps.Clone(b.query)
		req["amount"], req["total"] = ratNumber(grown), ratNumber(b.amount)
		reqs = append(reqs, req)
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	switch r.mode {
	case modeReserve:
		if r.objectUID() == "" {
			return r.uidViolation(), nil
		}
		return r.reserved(map[string]any{
			"id":            r.claimID(ratNumber(sum)),
			"object":        r.objectRef(),
			"requests":      reqs,
			"metadata":      g["metadata"],
			"policyVersion": get(r.params, "policyVersion", ""),
		})
	case modeCheck:
		return r.checkViolations(reqs)
	}
	return nil, nil
}

// reserved reserves claim and words the decision.
func (r *reviewer) reserved(claim map[string]any) ([]any, error) {
	d, err := r.quota.reserve(claim)
	if err != nil {
		return nil, err
	}
	if d["granted"] == true {
		return nil, nil
	}
	var vs []any
	reqs, _ := d["requests"].([]any)
	for _, q := range reqs {
		if q, ok := q.(map[string]any); ok && q["reason"] == "QuotaExceeded" {
			vs = append(vs, r.denial(q))
		}
	}
	if len(vs) > 0 {
		return vs, nil
	}
	return []any{map[string]any{"msg": fmt.Sprintf("quota denied: %v", d["message"]), "details": map[string]any{"decision": d}}}, nil
}

// checkViolations is what quota.reserve would answer for requests, from
// quota.usage: the same numbers and message as ledger.RequestDecision's,
// without holding anything.
func (r *reviewer) checkViolations(reqs []any) ([]any, error) {
	return r.readBuckets(reqs, func(b bucket, u map[string]any) map[string]any {
		if big.NewRat(toInt64(u["available"]), 1).Cmp(b.amount) >= 0 {
			return nil
		}
		d := maps.Clone(u)
		maps.Copy(d, b.query)
		d["amount"] = ratNumber(b.amount)
		d["message"] = fmt.Sprintf("requested %s of %v, available %d of %d (allocated %d, reserved %d)",
			b.amount.RatString(), b.query["resourceType"], toInt64(u["available"]), toInt64(u["limit"]), toInt64(u["allocated"]), toInt64(u["reserved"]))
		return r.denial(d)
	})
}

// readBuckets reads each bucket reqs ask of (quota.usage) and keeps what
// violation makes of its numbers (nil: nothing to report).
func (r *reviewer) readBuckets(reqs []any, violation func(b bucket, u map[string]any) map[string]any) ([]any, error) {
	buckets, err := bucketAmounts(reqs)
	if err != nil {
		return nil, err
	}
	var vs []any
	for _, b := range buckets {
		u, err := r.quota.usage(b.query)
		if err != nil {
			return nil, err
		}
		if v := violation(b, u); v != nil {
			vs = append(vs, v)
		}
	}
	return vs, nil
}

// auditViolations reports the object's consumers above their limit. Audit
// reviews every object: when no bucket of the constraint's resource types
// is over its limit (an index lookup), reading this object's buckets could
// only find each within it.
func (r *reviewer) auditViolations() ([]any, error) {
	scopes, errs := r.scopes()
	if len(errs) > 0 {
		return configViolations(errs), nil
	}
	over := false
	for _, e := range r.consumerEntries() {
		e, ok := e.(map[string]any)
		if !ok {
			continue
		}
		o, err := r.quota.overLimit(fmt.Sprint(r.resourceType(e)))
		if err != nil {
			return nil, err
		}
		if over = o; over {
			break
		}
	}
	if !over {
		return nil, nil
	}
	return r.auditBuckets(requests(scopes, json.Number("0"), nil))
}

// auditBuckets reports each bucket of reqs that holds more than its limit:
// a lowered limit never revokes what is held, so a bucket can sit above it,
// and audit is where that becomes visible.
func (r *reviewer) auditBuckets(reqs []any) ([]any, error) {
	if r.params["reportOverLimit"] == false {
		return nil, nil
	}
	return r.readBuckets(reqs, func(b bucket, u map[string]any) map[string]any {
		allocated, reserved, limit := toInt64(u["allocated"]), toInt64(u["reserved"]), toInt64(u["limit"])
		if allocated <= limit-reserved {
			return nil
		}
		return map[string]any{
			"msg": fmt.Sprintf("%s is over its quota of %v: allocated %d, reserved %d, limit %d",
				displayConsumer(b.query["consumer"], b.query["dimensions"]), b.query["resourceType"], allocated, reserved, limit),
			"details": details(b.query, u, json.Number("0")),
		}
	})
}

// denial words a request over its limit: the consumer, the numbers in base
// units (exact, as the ledger words them), the same numbers in the
// registration's display unit when it has one, and where the tenant reads
// them. q is a request of quota.reserve's decision, or quota.usage's answer
// with the query, amount and message.
func (r *reviewer) denial(q map[string]any) map[string]any {
	return map[string]any{
		"msg": fmt.Sprintf("quota exceeded for %s: %v%s%s",
			displayConsumer(q["consumer"], q["dimensions"]), q["message"], displayUnitsClause(q), r.seeClause(q)),
		"details": details(q, q, q["amount"]),
	}
}

// displayUnitsClause is the numbers again in the display unit, when the
// registration declares one other than the base unit, written exactly
// ("0.5", or "10/3" when the decimal would not end):
//
//	"; in cores (1000 millicores each): requested 0.5, available 0 of 8 (allocated 7.5, reserved 0.5)"
//
// Empty when the units are unknown: the base-unit numbers are the
// decision's own.
func displayUnitsClause(q map[string]any) string {
	m, _ := q["units"].(map[string]any)
	var u quotav1alpha1.Units
	u.BaseUnit, _ = m["baseUnit"].(string)
	u.DisplayUnit, _ = m["displayUnit"].(string)
	u.UnitConversionFactor = toInt64(m["unitConversionFactor"])
	if !u.HasDisplay() {
		return ""
	}
	base := "base units"
	if _, ok := m["baseUnit"]; ok {
		base = u.BaseUnit
	}
	return fmt.Sprintf("; in %s (%d %s each): requested %s, available %s of %s (allocated %s, reserved %s)",
		u.DisplayUnit, u.UnitConversionFactor, base,
		u.DisplayNumber(toInt64(q["amount"])), u.DisplayNumber(toInt64(q["available"])), u.DisplayNumber(toInt64(q["limit"])),
		u.DisplayNumber(toInt64(q["allocated"])), u.DisplayNumber(toInt64(q["reserved"])))
}

// seeClause is where the tenant reads the numbers: the consumer's
// EffectiveResourceGrant, which the manager keeps in every namespace of the
// consumer (so in the object's), and the kubectl plugin's table of them. A
// consumer the object's namespace does not belong to, a cluster-scoped
// object, or a Namespace being created (its EffectiveResourceGrants do not
// exist yet) points to the whole cluster's table.
func (r *reviewer) seeClause(q map[string]any) string {
	c, _ := q["consumer"].(map[string]any)
	if r.isNamespace() || r.namespace == "" || !r.namespaceBelongsTo(c) {
		return "; see kubectl quota usage -A"
	}
	if erg, _ := q["effectiveResourceGrant"].(string); erg != "" {
		return fmt.Sprintf("; see EffectiveResourceGrant %s/%s (kubectl quota usage -n %s)", r.namespace, erg, r.namespace)
	}
	return fmt.Sprintf("; see kubectl quota usage -n %s", r.namespace)
}

// namespaceBelongsTo says whether the object's namespace belongs to consumer
// c, as the manager decides where EffectiveResourceGrants go
// (v1alpha1.NamespaceBelongsTo, and a namespaced consumer's own namespace):
// it is c, its label for c's kind names c, or c lives in it.
func (r *reviewer) namespaceBelongsTo(c map[string]any) bool {
	group, _ := get(c, "apiGroup", "").(string)
	kind, _ := c["kind"].(string)
	switch {
	case group == "" && kind == "Namespace":
		if c["name"] == r.namespace {
			return true
		}
	case r.labelsKnown && c["name"] != nil && r.labels[quotav1alpha1.ConsumerLabelKey(group, kind)] == c["name"]:
		return true
	}
	return get(c, "namespace", "") == r.namespace
}

// A scope is one parameters.consumers entry resolved for the review: the
// consumer, the resource type and the dimensions of its request.
type scope struct {
	consumer     map[string]any
	resourceType any
	dimensions   any
}

// requests is one request of amount per scope, all or nothing; total, when
// not nil, is what the object counts once an UPDATE is in place (the
// observer folds the reservation only once it counts the object at total or
// more, so an update in flight stays reserved even where the generation
// cannot tell).
func requests(scopes []scope, amount, total any) []any {
	out := make([]any, len(scopes))
	for i, s := range scopes {
		req := map[string]any{"consumer": s.consumer, "resourceType": s.resourceType, "amount": amount, "dimensions": s.dimensions}
		if total != nil {
			req["total"] = total
		}
		out[i] = req
	}
	return out
}

func (r *reviewer) consumerEntries() []any {
	v, ok := r.params["consumers"]
	if !ok {
		return []any{map[string]any{"kind": "Namespace"}}
	}
	entries, _ := v.([]any)
	return entries
}

// scopes resolves parameters.consumers, or says why it cannot: every
// problem, each a violation.
func (r *reviewer) scopes() ([]scope, []string) {
	entries := r.consumerEntries()
	if len(entries) == 0 {
		return nil, []string{"parameters.consumers: must not be empty"}
	}
	var scopes []scope
	var errs []string
	for i, v := range entries {
		e, ok := v.(map[string]any)
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("parameters.consumers[%d]: must be an object", i))
		case get(e, "kind", "") == "":
			errs = append(errs, fmt.Sprintf("parameters.consumers[%d].kind: required", i))
		case r.resourceType(e) == "":
			errs = append(errs, fmt.Sprintf("parameters.resourceType: required (or parameters.consumers[%d].resourceType)", i))
		default:
			c, msg := r.resolveConsumer(e)
			if msg != "" {
				errs = append(errs, msg)
				continue
			}
			scopes = append(scopes, scope{consumer: c, resourceType: r.resourceType(e), dimensions: r.dimensions(e)})
		}
	}
	slices.Sort(errs)
	return scopes, slices.Compact(errs)
}

func (r *reviewer) resourceType(e map[string]any) any {
	return get(e, "resourceType", get(r.params, "resourceType", ""))
}

// dimensions are parameters.dimensions with the entry's own over them.
func (r *reviewer) dimensions(e map[string]any) any {
	p, pok := get(r.params, "dimensions", map[string]any{}).(map[string]any)
	own, eok := get(e, "dimensions", map[string]any{}).(map[string]any)
	switch {
	case !pok:
		return r.params["dimensions"]
	case !eok:
		return e["dimensions"]
	}
	out := maps.Clone(p)
	maps.Copy(out, own)
	return out
}

// resolveConsumer names the consumer of entry e: a fixed name wins; kind
// Namespace is the object's namespace; any other kind is named by a label on
// that namespace. The message says why it cannot.
func (r *reviewer) resolveConsumer(e map[string]any) (map[string]any, string) {
	consumer := func(name any) map[string]any {
		return map[string]any{"apiGroup": get(e, "apiGroup", ""), "kind": e["kind"], "name": name, "namespace": get(e, "namespace", "")}
	}
	namespaceKind := get(e, "apiGroup", "") == "" && e["kind"] == "Namespace"
	key := get(e, "labelKey", nil)
	if key == nil {
		group, _ := get(e, "apiGroup", "").(string)
		kind, _ := e["kind"].(string)
		key = quotav1alpha1.ConsumerLabelKey(group, kind)
	}
	switch {
	case get(e, "name", "") != "":
		return consumer(e["name"]), ""
	case namespaceKind && r.namespace != "":
		return consumer(r.namespace), ""
	case namespaceKind:
		ref := r.objectRef()
		return nil, fmt.Sprintf("cannot count %v %q against a namespace: it is cluster-scoped", ref["kind"], ref["name"])
	case r.namespace == "":
		ref := r.objectRef()
		return nil, fmt.Sprintf("cannot find the %v of %v %q: it is cluster-scoped, so no namespace label %q names one", e["kind"], ref["kind"], ref["name"], key)
	}
	if k, ok := key.(string); ok && r.labelsKnown {
		if name := r.labels[k]; name != nil && name != "" {
			return consumer(name), ""
		}
	}
	if !r.labelsKnown {
		return nil, fmt.Sprintf("cannot find the %v of namespace %q: the namespace is not in Gatekeeper's synced inventory (sync v1 Namespace)", e["kind"], r.namespace)
	}
	return nil, fmt.Sprintf("cannot find the %v of namespace %q: it has no label %q", e["kind"], r.namespace, key)
}

// isNamespace says whether the reviewed object is a Namespace: it counts
// against itself, and its EffectiveResourceGrants do not exist yet.
func (r *reviewer) isNamespace() bool {
	kind, _ := r.facts["kind"].(map[string]any)
	return get(kind, "apiGroup", "") == "" && get(kind, "kind", "") == "Namespace"
}

func (r *reviewer) objectUID() any { return get(r.meta, "uid", "") }

// objectRef is the claim's object: the reviewed kind (a Scale's workload's),
// its namespace, name and uid.
func (r *reviewer) objectRef() map[string]any {
	kind, _ := r.facts["kind"].(map[string]any)
	return map[string]any{
		"apiGroup":  get(kind, "apiGroup", ""),
		"kind":      get(kind, "kind", ""),
		"namespace": get(r.meta, "namespace", get(r.facts, "reviewNamespace", "")),
		"name":      get(r.meta, "name", get(r.facts, "reviewName", "")),
		"uid":       r.objectUID(),
	}
}

// claimID is the claim's id: a retried or re-evaluated request finds its
// own reservation under it, so it never counts twice. A CREATE's is the
// object's uid; an UPDATE reserves only its growth n, under
// `<uid>/<generation>/<growth>`: the new object's metadata.generation,
// which the API server bumps before validating admission (0 for a kind
// without one). The observer folds it once it has evaluated the object at
// that generation or later, and lets it expire when the object never
// reaches it (an update a later webhook rejected). The growth is part of
// the id because a rejected update never persists its generation: the next
// update gets the same number, and must not find the rejected one's smaller
// reservation.
func (r *reviewer) claimID(n any) any {
	if r.operation == "CREATE" {
		return r.objectUID()
	}
	return fmt.Sprintf("%v/%s/%s", r.objectUID(), formatNumber(get(r.meta, "generation", json.Number("0"))), formatNumber(n))
}

func (r *reviewer) uidViolation() []any {
	ref := r.objectRef()
	return []any{map[string]any{
		"msg":     fmt.Sprintf("quota: cannot reserve for %v %q: metadata.uid is empty (the API server sets it before validating admission)", ref["kind"], ref["name"]),
		"details": map[string]any{},
	}}
}

// amountViolation denies an amount that cannot be told: an amount never
// counts 0 for want of one.
func (r *reviewer) amountViolation(n any) []any {
	reason := ""
	switch v := n.(type) {
	case string:
		reason = v
	case map[string]any:
		if e, ok := v["error"]; ok && e != nil && e != false {
			reason = fmt.Sprint(e)
			break
		}
		reason = "the amount must be a whole number, got " + formatValue(n)
	default:
		reason = "the amount must be a whole number, got " + formatValue(n)
	}
	ref := r.objectRef()
	return []any{map[string]any{
		"msg":     fmt.Sprintf("quota: cannot count %v %q: %s", ref["kind"], ref["name"], reason),
		"details": map[string]any{},
	}}
}

func configViolations(errs []string) []any {
	out := make([]any, len(errs))
	for i, m := range errs {
		out[i] = map[string]any{"msg": "quota: " + m, "details": map[string]any{}}
	}
	return out
}

// details are a violation's numbers for a program to read.
func details(s, u map[string]any, n any) map[string]any {
	return map[string]any{
		"consumer":     s["consumer"],
		"resourceType": s["resourceType"],
		"dimensions":   s["dimensions"],
		"requested":    n,
		"limit":        u["limit"],
		"allocated":    u["allocated"],
		"reserved":     u["reserved"],
		"available":    u["available"],
		"bucket":       u["bucket"],
	}
}

// displayConsumer names a consumer and its dimensions for a message:
// "Organization acme {region=dfw}".
func displayConsumer(consumer, dimensions any) string {
	c, _ := consumer.(map[string]any)
	name := fmt.Sprintf("%v %v", c["kind"], c["name"])
	if ns := get(c, "namespace", ""); ns != "" {
		name = fmt.Sprintf("%v %v/%v", c["kind"], ns, c["name"])
	}
	dims, _ := dimensions.(map[string]any)
	if len(dims) == 0 {
		return name
	}
	pairs := make([]string, 0, len(dims))
	for k, v := range dims {
		pairs = append(pairs, fmt.Sprintf("%s=%v", k, v))
	}
	slices.Sort(pairs)
	return name + " {" + strings.Join(pairs, ",") + "}"
}

// bucket is one bucket a claim's requests ask of, with the sum asked: the
// ledger sums the requests of one claim for one bucket.
type bucket struct {
	query  map[string]any
	key    ast.Value
	amount *big.Rat
}

type buckets []bucket

func (bs buckets) find(query map[string]any) (bucket, bool) {
	key, err := ast.InterfaceToValue(query)
	if err != nil {
		return bucket{}, false
	}
	i := slices.IndexFunc(bs, func(b bucket) bool { return b.key.Compare(key) == 0 })
	if i < 0 {
		return bucket{}, false
	}
	return bs[i], true
}

// bucketAmounts groups requests by bucket ({consumer, resourceType,
// dimensions}), in the order Rego iterates an object keyed by them.
func bucketAmounts(reqs []any) (buckets, error) {
	var out buckets
	for i, v := range reqs {
		req, ok := v.(map[string]any)
		if !ok {
			return nil, rego.NewHaltError(fmt.Errorf("requests[%d]: must be an object, got %s", i, typeName(v)))
		}
		n, ok := number(req["amount"])
		if !ok {
			return nil, rego.NewHaltError(fmt.Errorf("requests[%d].amount: must be a number, got %s", i, typeName(req["amount"])))
		}
		query := map[string]any{"consumer": req["consumer"], "resourceType": req["resourceType"], "dimensions": req["dimensions"]}
		if b, ok := out.find(query); ok {
			b.amount.Add(b.amount, n)
			continue
		}
		key, err := ast.InterfaceToValue(query)
		if err != nil {
			return nil, rego.NewHaltError(fmt.Errorf("requests[%d]: %w", i, err))
		}
		out = append(out, bucket{query: query, key: key, amount: new(big.Rat).Set(n)})
	}
	slices.SortFunc(out, func(a, b bucket) int { return a.key.Compare(b.key) })
	return out, nil
}

// get is Rego's object.get(m, key, def): the value at key when present.
func get(m map[string]any, key string, def any) any {
	if v, ok := m[key]; ok {
		return v
	}
	return def
}

// number is v as an exact rational when it is a JSON number.
func number(v any) (*big.Rat, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	return new(big.Rat).SetString(string(n))
}

// ratNumber writes r as a JSON number: exact, a decimal when it ends.
func ratNumber(r *big.Rat) json.Number {
	if r.IsInt() {
		return json.Number(r.Num().String())
	}
	s := strings.TrimRight(r.FloatString(30), "0")
	return json.Number(s)
}

// toInt64 reads the ledger's numbers, as the builtins return them.
func toInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int:
		return int64(n)
	case json.Number:
		i, _ := n.Int64()
		return i
	}
	return 0
}

// formatNumber writes a number as Rego's sprintf %d does.
func formatNumber(v any) string {
	if n, ok := number(v); ok && n.IsInt() {
		return n.Num().String()
	}
	if n, ok := v.(int64); ok {
		return strconv.FormatInt(n, 10)
	}
	return formatValue(v)
}

// formatValue writes any value as Rego's sprintf %v does.
func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return string(x)
	}
	val, err := ast.InterfaceToValue(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return val.String()
}
