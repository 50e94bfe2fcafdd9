package builtins_test

import (
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/counted"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// published is a CountedPolicies holding a fixed record.
type published counted.Record

func (p published) Counted(version string) bool { return counted.Record(p).Has(version) }

func withVersion(c map[string]any, version string) map[string]any {
	c["policyVersion"] = version
	return c
}

// A claim of a constraint whose policy version the observer has not
// published is denied with a plain message and reserves nothing; once
// published, the same claim is decided by the ledger.
func TestReserveDeniesWhileTheConstraintIsRecounted(t *testing.T) {
	l := useLedger(t, ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/pods", Amount: 2})
	record := counted.Record{}
	record.Add("QuotaEntity/pods/00000000000000aa")
	useEnv(t, func(env *builtins.Env) { env.Counted = published(record) })

	const recountMsg = "quota for core/pods is being recounted under QuotaEntity pods, retry in a few seconds"
	for _, tc := range []struct{ name, version, msg string }{
		{"changed since counted", "QuotaEntity/pods/00000000000000bb", recountMsg},
		{"never counted", "QuotaEntity/other/00000000000000aa", "quota for core/pods is being recounted under QuotaEntity other, retry in a few seconds"},
		{"not stamped", "", "quota for core/pods is not counted yet: the constraint has no parameters.policyVersion (the quotakeeper manager sets it; a custom template's parameter schema must declare it, see docs/policy-authoring.md)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustEval(t, "quota.reserve(input)", withVersion(claim("c1", pods(teamA, 1)), tc.version))
			assertEqual(t, "decision", got, map[string]any{
				"id": "c1", "granted": false, "message": tc.msg,
				"requests": []any{map[string]any{
					"consumer":     map[string]any{"apiGroup": "", "kind": "Namespace", "name": "team-a", "namespace": ""},
					"resourceType": "core/pods", "dimensions": map[string]any{}, "amount": jsonNumber(1),
					"granted": false, "reason": builtins.ReasonRecounting, "message": tc.msg,
				}},
			})
			assertEqual(t, "usage", usageOf(t, l, teamA), ledger.Usage{Limit: 2, Available: 2})
		})
	}

	got := mustEval(t, "quota.reserve(input)", withVersion(claim("c1", pods(teamA, 1)), "QuotaEntity/pods/00000000000000aa"))
	if granted := got.(map[string]any)["granted"]; granted != true {
		t.Fatalf("counted version: granted %v, want true", granted)
	}
	assertEqual(t, "usage", usageOf(t, l, teamA), ledger.Usage{Limit: 2, Reserved: 1, Available: 1})
}
