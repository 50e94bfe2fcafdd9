// Package counted says whether every object that existed when a quota
// constraint took its current form has been counted under that form: the
// condition for deciding a request against its buckets (issue 22, case 5).
//
// A quota constraint's policy version is a digest of what decides what it
// counts (its match, its parameters but for the version itself, and whether
// it counts at all: Counts), written
// into the constraint as spec.parameters.policyVersion by the manager's
// mutating webhook before the constraint is stored (or, for a constraint
// that reached the API server without it, by the observer afterwards). The
// template's Rego hands it to quota.reserve with every claim, because a
// template sees its constraint's parameters and nothing else of it.
//
// The observer, once it has evaluated every object under a version and
// written every bucket that changed, publishes it in one ConfigMap of the
// system namespace (Record); Gatekeeper's plugin reads that ConfigMap and
// quota.reserve denies a claim whose version is not published ("being
// recounted"). A new or changed constraint is therefore never decided
// against buckets that do not count the objects it now covers, and a
// version published stays true until the constraint changes again, which
// changes its version.
package counted

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/util"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakeeper/quotakeeper/internal/bypass"
)

// Field is the constraint parameter holding the policy version.
const Field = "policyVersion"

// ConfigMapName is the ConfigMap, in the system namespace, holding the
// published versions: one data key per constraint (Key), whose value is
// the digest of the version counted.
const ConfigMapName = "quotakeeper-counted-policies"

// Version is the policy version of constraint u as it stands:
// "<Kind>/<name>/<digest>", the digest over what decides what u counts:
// spec.match, spec.parameters without the version (so stamping it changes
// nothing it covers) and Counts(u). A QuotaBypass relaxing u to warn leaves
// it as it is: the observer goes on counting u, so nothing is recounted.
func Version(u *unstructured.Unstructured) (string, error) {
	spec, _ := u.Object["spec"].(map[string]any)
	params, _ := runtime.DeepCopyJSONValue(spec["parameters"]).(map[string]any)
	delete(params, Field)
	// encoding/json writes map keys sorted: the same spec, the same bytes.
	b, err := json.Marshal(map[string]any{"match": spec["match"], "parameters": params, "counts": Counts(u)})
	if err != nil {
		return "", fmt.Errorf("constraint %s %s: spec: %w", u.GetKind(), u.GetName(), err)
	}
	sum := sha256.Sum256(b)
	return u.GetKind() + "/" + u.GetName() + "/" + hex.EncodeToString(sum[:8]), nil
}

// Counts reports whether constraint u denies at admission: only such
// constraints count (warn and dryrun hold nothing once the object exists).
// A constraint a QuotaBypass relaxed to warn counts as the action it had
// before: a bypass admits objects over quota, it does not stop counting
// them (the bucket shows used above its limit).
func Counts(u *unstructured.Unstructured) bool {
	action, err := util.GetEnforcementAction(u.Object)
	if err != nil {
		return false
	}
	if original, ok := bypass.OriginalAction(u); ok {
		action = util.EnforcementAction(original)
	}
	switch action {
	case util.Deny:
		return true
	case util.Scoped:
		actions, err := util.ScopedActionForEP(util.WebhookEnforcementPoint, u)
		return err == nil && slices.Contains(actions, string(util.Deny))
	}
	return false
}

// Stamped is the version written into u's parameters, or "".
func Stamped(u *unstructured.Unstructured) string {
	v, _, _ := unstructured.NestedString(u.Object, "spec", "parameters", Field)
	return v
}

// Key is the Record key of a constraint: "<Kind>.<name>" (a valid
// ConfigMap key; a kind has no dot).
func Key(kind, name string) string { return kind + "." + name }

// Parse splits a version into its Record key and digest.
func Parse(version string) (key, digest string, ok bool) {
	parts := strings.Split(version, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", false
	}
	return Key(parts[0], parts[1]), parts[2], true
}

// Constraint names the constraint a version belongs to, "<Kind> <name>",
// for messages; the version itself when it does not parse.
func Constraint(version string) string {
	parts := strings.Split(version, "/")
	if len(parts) != 3 {
		return version
	}
	return parts[0] + " " + parts[1]
}

// Record is the published versions: digest by Key.
type Record map[string]string

// Add publishes version.
func (r Record) Add(version string) {
	if key, digest, ok := Parse(version); ok {
		r[key] = digest
	}
}

// Has reports whether version is published.
func (r Record) Has(version string) bool {
	key, digest, ok := Parse(version)
	return ok && r[key] == digest
}
