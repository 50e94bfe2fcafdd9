package builtins

import (
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
)

// reserve implements quota.reserve(claim) against env.
// Outside an observation every call is an admission decision, which the
// metrics count by result (package metrics).
func reserve(env *Env, bctx rego.BuiltinContext, arg *ast.Term) (*ast.Term, error) {
	v, err := toJSON("claim", arg)
	if err != nil {
		if recorderFrom(bctx) == nil {
			metrics.Halted(ReserveName, metrics.CauseInvalidInput, true)
		}
		return nil, err
	}
	d, err := reserveClaim(env, bctx, v)
	if err != nil {
		return nil, err
	}
	return toTerm(d)
}

// reserveClaim is quota.reserve on its argument as a JSON value (numbers as
// json.Number): the decision as quota.reserve returns it. quota.review
// reserves through it too.
func reserveClaim(env *Env, bctx rego.BuiltinContext, v any) (map[string]any, error) {
	r := recorderFrom(bctx)
	halt := func(cause string, err error) (map[string]any, error) {
		if r == nil {
			metrics.Halted(ReserveName, cause, true)
		}
		return nil, err
	}
	claim, md, version, err := decodeClaim(v)
	if err != nil {
		return halt(metrics.CauseInvalidInput, err)
	}
	if r != nil {
		return r.record(RecordedClaim{Claim: claim, Metadata: md}, env.units), nil
	}
	if denial := recounting(env, claim, version); denial != nil {
		metrics.Decision(false, 0)
		return denial, nil
	}
	l, err := env.readyLedger()
	if err != nil {
		return halt(metrics.CauseNotReady, err)
	}
	ctx, cancel := withDeadline(bctx.Context, env.Deadline)
	defer cancel()
	start := time.Now()
	d, added, err := l.ReserveUndoable(ctx, claim)
	if err != nil {
		if h := validationHalt("claim", err); h != nil {
			return halt(metrics.CauseInvalidInput, h)
		}
		// The outcome is unknown (or a rollback failed): deny rather than guess.
		cause := metrics.CauseLedgerError
		if ctx.Err() != nil {
			cause = metrics.CauseDeadline
		}
		return halt(cause, rego.NewHaltError(fmt.Errorf("reserving claim %q: %w", claim.ID, err)))
	}
	// Recorded before anything else can fail: a halt below denies the
	// review, which then gives this back too (reservations.go).
	reservationsFrom(bctx.Context).add(l, added)
	metrics.Decision(d.Granted, time.Since(start))
	if added.Leased() {
		metrics.LeasedAdmission()
	}
	return decisionJSON(claim.ID, d, env.units), nil
}

// decodeClaim decodes quota.reserve's argument: the claim for the ledger,
// the metadata of its view and its constraint's policy version (package
// counted), which the ledger never sees.
func decodeClaim(v any) (ledger.Claim, ClaimMetadata, string, error) {
	var d decoder
	m := d.object("claim", v, "id", "object", "requests", "metadata", "policyVersion")
	if m == nil {
		return ledger.Claim{}, ClaimMetadata{}, "", d.err()
	}
	var c ledger.Claim
	c.ID = d.requiredString("claim", m, "id")
	if o, ok := m["object"]; ok {
		if obj := d.object("claim.object", o, "apiGroup", "kind", "namespace", "name", "uid"); obj != nil {
			c.Object = ledger.ObjectRef{
				APIGroup:  d.str("claim.object", obj, "apiGroup"),
				Kind:      d.str("claim.object", obj, "kind"),
				Namespace: d.str("claim.object", obj, "namespace"),
				Name:      d.str("claim.object", obj, "name"),
				UID:       d.str("claim.object", obj, "uid"),
			}
		}
	}
	if d.required("claim", m, "requests") {
		reqs, ok := m["requests"].([]any)
		if !ok {
			d.fail("claim.requests", "must be an array, got %s", typeName(m["requests"]))
		}
		for i, r := range reqs {
			path := fmt.Sprintf("claim.requests[%d]", i)
			rm := d.object(path, r, "consumer", "resourceType", "amount", "total", "dimensions")
			if rm == nil {
				continue
			}
			req := ledger.Request{Consumer: d.consumer(path, rm)}
			req.ResourceType = d.requiredString(path, rm, "resourceType")
			if d.required(path, rm, "amount") {
				req.Amount = d.int64(path, rm, "amount")
			}
			if _, ok := rm["total"]; ok {
				req.Total = d.int64(path, rm, "total")
			}
			req.Dimensions = d.labels(path, rm, "dimensions")
			c.Requests = append(c.Requests, req)
		}
	}
	md := d.metadata("claim", m)
	version := d.str("claim", m, "policyVersion")
	return c, md, version, d.err()
}

// decisionJSON is d as quota.reserve returns it, each request with the units
// of its resource type.
func decisionJSON(id string, d ledger.Decision, units func(resourceType string) map[string]any) map[string]any {
	reqs := make([]any, len(d.Requests))
	for i, r := range d.Requests {
		reqs[i] = map[string]any{
			"consumer":     consumerJSON(r.Request.Consumer),
			"resourceType": r.Request.ResourceType,
			"dimensions":   dimensionsJSON(r.Request.Dimensions),
			"amount":       r.Request.Amount,
			"bucket":       r.Bucket,
			"granted":      r.Granted,
			"reason":       r.Reason,
			"limit":        r.Limit,
			"allocated":    r.Allocated,
			"reserved":     r.Reserved,
			"available":    r.Available,
			"message":      r.Message,
			// How to show the numbers, and the object that shows them to
			// the tenant: denials name both (rego/lib/quota.rego).
			"units":                  units(r.Request.ResourceType),
			"effectiveResourceGrant": effectiveGrantName(r.Request.Consumer, r.Request.ResourceType),
		}
	}
	return map[string]any{
		"id":       id,
		"granted":  d.Granted,
		"message":  d.Message(),
		"requests": reqs,
	}
}

// effectiveGrantName is the consumer's EffectiveResourceGrant for the
// resource type: kept in every namespace of the consumer under this name.
func effectiveGrantName(c ledger.Consumer, resourceType string) string {
	return quotav1alpha1.EffectiveResourceGrantName(ledgerconv.ConsumerRef(c), resourceType)
}

func consumerJSON(c ledger.Consumer) map[string]any {
	return map[string]any{"apiGroup": c.APIGroup, "kind": c.Kind, "name": c.Name, "namespace": c.Namespace}
}

// dimensionsJSON is never null, so Rego can index it without a guard.
func dimensionsJSON(dims map[string]string) map[string]any {
	out := make(map[string]any, len(dims))
	for k, v := range dims {
		out[k] = v
	}
	return out
}

func toTerm(v any) (*ast.Term, error) {
	val, err := ast.InterfaceToValue(v)
	if err != nil {
		return nil, rego.NewHaltError(fmt.Errorf("encoding result: %w", err))
	}
	return ast.NewTerm(val), nil
}
