package builtins

// Observe mode: the observer (package observer) evaluates live objects with
// the same templates as admission, to learn what each counts against which
// bucket. The builtins then record instead of reserving.

import (
	"context"
	"math"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// Recorder collects the claims quota.reserve is asked for while evaluating
// one object in observe mode, each with its metadata; quota.reserve then
// answers "granted" without touching any ledger, and quota.usage answers
// limit=max int64, zeros otherwise (available is limit - allocated -
// reserved, so max int64 too). Safe for one evaluation at a time.
type Recorder struct{ Claims []RecordedClaim }

type recorderKey struct{}

// WithRecorder returns a context under which the builtins run in observe
// mode, recording into r. The frameworks rego driver hands the context of
// Client.Review to rego.Eval, and OPA gives it to every builtin as
// BuiltinContext.Context, so the mode travels with one evaluation and never
// changes what concurrent admissions do.
func WithRecorder(ctx context.Context, r *Recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, r)
}

func recorderFrom(bctx rego.BuiltinContext) *Recorder {
	if bctx.Context == nil {
		return nil
	}
	r, _ := bctx.Context.Value(recorderKey{}).(*Recorder)
	return r
}

// record answers quota.reserve in observe mode: every request granted with
// unlimited numbers, so the template takes its "admitted" path.
func (r *Recorder) record(rc RecordedClaim, units func(resourceType string) map[string]any) map[string]any {
	r.Claims = append(r.Claims, rc)
	claim := rc.Claim
	d := ledger.Decision{Granted: true}
	index := map[ledger.BucketKey]int{}
	for _, req := range claim.Requests {
		key := ledger.NewBucketKey(req.Consumer, req.ResourceType, req.Dimensions)
		if i, ok := index[key]; ok {
			d.Requests[i].Request.Amount += req.Amount
			continue
		}
		index[key] = len(d.Requests)
		d.Requests = append(d.Requests, ledger.RequestDecision{Request: req, Bucket: key.Name()})
	}
	for i := range d.Requests {
		rd := &d.Requests[i]
		rd.Granted, rd.Reason = true, ledger.ReasonQuotaAvailable
		rd.Limit, rd.Available = math.MaxInt64, math.MaxInt64
		rd.Message = "observed"
	}
	return decisionJSON(claim.ID, d, units)
}

// observedUsage is quota.usage's answer in observe mode.
func observedUsage(key ledger.BucketKey) map[string]any {
	return map[string]any{
		"bucket":    key.Name(),
		"limit":     int64(math.MaxInt64),
		"allocated": int64(0),
		"reserved":  int64(0),
		"available": int64(math.MaxInt64),
	}
}
