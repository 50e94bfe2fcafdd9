package builtins

import (
	"fmt"
	"slices"
	"strings"

	"github.com/quotakeeper/quotakeeper/internal/counted"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// CountedPolicies tells which constraints' policy versions the observer has
// counted every existing object under (package counted).
type CountedPolicies interface {
	// Counted reports whether version is published; false until the
	// source has read the record.
	Counted(version string) bool
}

// ReasonRecounting is a request's reason when its constraint is being
// recounted.
const ReasonRecounting = "Recounting"

// recounting is the denial of claim when env's Counted does not hold its
// constraint's policy version (version, from the constraint's parameters),
// or nil: a constraint new or changed since the observer last counted is
// not decided against buckets that may not count what it now covers. An Env
// without Counted checks nothing.
func recounting(env *Env, claim ledger.Claim, version string) map[string]any {
	if env == nil || env.Counted == nil || (version != "" && env.Counted.Counted(version)) {
		return nil
	}
	var types []string
	for _, r := range claim.Requests {
		if !slices.Contains(types, r.ResourceType) {
			types = append(types, r.ResourceType)
		}
	}
	msg := fmt.Sprintf("quota for %s is being recounted under %s, retry in a few seconds", strings.Join(types, ", "), counted.Constraint(version))
	if version == "" {
		msg = fmt.Sprintf("quota for %s is not counted yet: the constraint has no parameters.%s (the quotakeeper manager sets it; a custom template's parameter schema must declare it, see docs/policy-authoring.md)", strings.Join(types, ", "), counted.Field)
	}
	reqs := make([]any, len(claim.Requests))
	for i, r := range claim.Requests {
		reqs[i] = map[string]any{
			"consumer":     consumerJSON(r.Consumer),
			"resourceType": r.ResourceType,
			"dimensions":   dimensionsJSON(r.Dimensions),
			"amount":       r.Amount,
			"granted":      false,
			"reason":       ReasonRecounting,
			"message":      msg,
		}
	}
	return map[string]any{"id": claim.ID, "granted": false, "message": msg, "requests": reqs}
}
