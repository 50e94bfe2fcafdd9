package rego_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/claimpolicies"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

// The QuotaClaimPolicy template, as shipped, with the real quota.policy_claim
// over policies compiled by celpolicy and the real ledger.

var namespaceOfTrigger = quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: "{{ trigger.metadata.namespace }}"}

// configMapPolicy claims one core/configmaps from a ConfigMap's namespace,
// except for system:masters, in a claim named after the ConfigMap.
func configMapPolicy() *builders.ClaimPolicyWrapper {
	return builders.ClaimPolicy("configmaps", "v1", "ConfigMap", namespaceOfTrigger).Generation(1).
		Condition(`!user.groups.exists(g, g == "system:masters")`).
		TargetName("{{ trigger.metadata.name }}-claim").
		TargetLabel("team", `{{ trigger.metadata.?labels.team.orValue("none") }}`).
		TargetAnnotation("created-by", "{{ user.username }}").
		Request("core/configmaps", intstr.FromInt32(1))
}

// policyHarness is a harness whose one QuotaClaimPolicy constraint enforces
// the first policy; the builtin holds all of them.
func policyHarness(t testing.TB, policies ...*quotav1alpha1.ClaimCreationPolicy) *harness {
	t.Helper()
	h := newHarness(t, "quotaclaimpolicy", map[string]any{"policy": policies[0].Name, "generation": policies[0].Generation})
	h.env.ClaimPolicies = claimpolicies.NewSet(policies...)
	return h
}

var alice = authenticationv1.UserInfo{Username: "alice", Groups: []string{"devs", "system:authenticated"}}

func createAs(user authenticationv1.UserInfo, uid string, obj map[string]any) request {
	return request{op: create, uid: uid, obj: obj, user: user}
}

func TestClaimPolicyAllowsUpToTheGrantAndDeniesPastIt(t *testing.T) {
	h := policyHarness(t, configMapPolicy().Obj())
	h.grant("g", teamA, "core/configmaps", 2)
	assertMessages(t, "create 1", h.review(createAs(alice, "req-1", configMap("team-a", "cm1"))))
	assertMessages(t, "create 2", h.review(createAs(alice, "req-2", configMap("team-a", "cm2"))))
	assertMessages(t, "create 3", h.review(createAs(alice, "req-3", configMap("team-a", "cm3"))),
		"quota exceeded for Namespace team-a: requested 1 of core/configmaps, available 0 of 2 (allocated 0, reserved 2)"+seeEffective("team-a", teamA, "core/configmaps"))
	assertUsage(t, h, teamA, "core/configmaps", ledger.Usage{Limit: 2, Reserved: 2})

	// A retried request finds its reservation under the object's uid.
	assertMessages(t, "create 1 again", h.review(createAs(alice, "req-1", configMap("team-a", "cm1"))))
	assertUsage(t, h, teamA, "core/configmaps", ledger.Usage{Limit: 2, Reserved: 2})
}

func TestClaimPolicyConditionsDecideWhetherTheObjectClaims(t *testing.T) {
	h := policyHarness(t, configMapPolicy().Obj())
	h.grant("g", teamA, "core/configmaps", 1)
	root := authenticationv1.UserInfo{Username: "root", Groups: []string{"system:masters"}}
	assertMessages(t, "a master's create", h.review(createAs(root, "req-1", configMap("team-a", "cm1"))))
	assertUsage(t, h, teamA, "core/configmaps", ledger.Usage{Limit: 1, Available: 1})
	assertMessages(t, "alice's create", h.review(createAs(alice, "req-2", configMap("team-a", "cm2"))))
	assertUsage(t, h, teamA, "core/configmaps", ledger.Usage{Limit: 1, Reserved: 1})
}

// A CEL error for this object denies with its message, as a violation of
// its own constraint: the other policy's constraint still decides.
func TestClaimPolicyCELErrorDeniesWithTheMessage(t *testing.T) {
	payload := builders.ClaimPolicy("payload", "v1", "ConfigMap", namespaceOfTrigger).Generation(1).
		Request("core/configmap-bytes", intstr.FromString("{{ size(trigger.data.payload) }}")).Obj()
	h := policyHarness(t, payload, configMapPolicy().Obj())
	h.addConstraint("configmaps", map[string]any{"policy": "configmaps"})
	h.grant("g", teamA, "core/configmaps", 5)
	h.grant("b", teamA, "core/configmap-bytes", 100)

	assertMessages(t, "no payload", h.review(createAs(alice, "req-1", configMap("team-a", "cm1"))),
		`quota: ClaimCreationPolicy "payload": spec.target.resourceClaimTemplate.spec.requests[0].amount: Invalid value: "{{ size(trigger.data.payload) }}": evaluation failed: no such key: data`)
	assertUsage(t, h, teamA, "core/configmap-bytes", ledger.Usage{Limit: 100, Available: 100})
	assertUsage(t, h, teamA, "core/configmaps", ledger.Usage{Limit: 5, Reserved: 1, Available: 4})

	withPayload := configMap("team-a", "cm2")
	withPayload["data"] = map[string]any{"payload": "12345"}
	assertMessages(t, "a payload of 5", h.review(createAs(alice, "req-2", withPayload)))
	assertUsage(t, h, teamA, "core/configmap-bytes", ledger.Usage{Limit: 100, Reserved: 5, Available: 95})
}

// Several policies on one kind each claim; one policy's requests are one
// claim, all or nothing.
func TestClaimPoliciesEachClaimAndEachIsAllOrNothing(t *testing.T) {
	both := builders.ClaimPolicy("bytes-and-keys", "v1", "ConfigMap", namespaceOfTrigger).Generation(1).
		Request("core/configmap-bytes", intstr.FromString("{{ size(trigger.data.payload) }}")).
		Request("core/configmap-keys", intstr.FromString("{{ size(trigger.data) }}")).Obj()
	h := policyHarness(t, both, configMapPolicy().Obj())
	h.addConstraint("configmaps", map[string]any{"policy": "configmaps"})
	h.grant("g", teamA, "core/configmaps", 5)
	h.grant("b", teamA, "core/configmap-bytes", 100)
	h.grant("k", teamA, "core/configmap-keys", 1)

	cm := func(name string, data map[string]any) map[string]any {
		obj := configMap("team-a", name)
		obj["data"] = data
		return obj
	}
	assertMessages(t, "one key", h.review(createAs(alice, "req-1", cm("cm1", map[string]any{"payload": "123"}))))
	assertUsage(t, h, teamA, "core/configmaps", ledger.Usage{Limit: 5, Reserved: 1, Available: 4})
	assertUsage(t, h, teamA, "core/configmap-bytes", ledger.Usage{Limit: 100, Reserved: 3, Available: 97})
	assertUsage(t, h, teamA, "core/configmap-keys", ledger.Usage{Limit: 1, Reserved: 1})

	// No key left: the policy's bytes are not taken either; the other
	// policy's claim is its own.
	assertMessages(t, "no key left", h.review(createAs(alice, "req-2", cm("cm2", map[string]any{"payload": "12"}))),
		"quota exceeded for Namespace team-a: requested 1 of core/configmap-keys, available 0 of 1 (allocated 0, reserved 1)"+seeEffective("team-a", teamA, "core/configmap-keys"))
	assertUsage(t, h, teamA, "core/configmap-bytes", ledger.Usage{Limit: 100, Reserved: 3, Available: 97})
	assertUsage(t, h, teamA, "core/configmaps", ledger.Usage{Limit: 5, Reserved: 2, Available: 3})
}

func TestClaimPolicyDryRunAuditAndUpdatesNeverReserve(t *testing.T) {
	h := policyHarness(t, configMapPolicy().Obj())
	h.grant("g", teamA, "core/configmaps", 1)
	none := ledger.Usage{Limit: 1, Available: 1}
	dryRun := createAs(alice, "req-1", configMap("team-a", "cm1"))
	dryRun.dryRun = true
	assertMessages(t, "dry run", h.review(dryRun))
	assertMessages(t, "audit", h.audit(configMap("team-a", "cm0")))
	cm := configMap("team-a", "cm0")
	assertMessages(t, "update", h.review(request{op: update, uid: "req-2", obj: cm, old: cm, user: alice}))
	assertMessages(t, "delete", h.review(request{op: remove, uid: "req-3", obj: cm, old: cm, user: alice}))
	assertUsage(t, h, teamA, "core/configmaps", none)

	assertMessages(t, "create", h.review(createAs(alice, "req-4", configMap("team-a", "cm1"))))
	full := "quota exceeded for Namespace team-a: requested 1 of core/configmaps, available 0 of 1 (allocated 0, reserved 1)" + seeEffective("team-a", teamA, "core/configmaps")
	dryRun = createAs(alice, "req-5", configMap("team-a", "cm2"))
	dryRun.dryRun = true
	assertMessages(t, "dry run at the limit", h.review(dryRun), full)
	assertMessages(t, "create at the limit", h.review(createAs(alice, "req-6", configMap("team-a", "cm2"))), full)

	h.grant("g", teamA, "core/configmaps", 0)
	if _, err := h.ledger.Refresh(h.ctx, ledger.NewBucketKey(teamA, "core/configmaps", nil)); err != nil {
		t.Fatal(err)
	}
	assertMessages(t, "audit over the limit", h.audit(configMap("team-a", "cm1")),
		"Namespace team-a is over its quota of core/configmaps: allocated 0, reserved 1, limit 0")
}

// The constraint names the policy and the generation it was made for; the
// builtin answers for what it holds.
func TestClaimPolicyLookup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy *quotav1alpha1.ClaimCreationPolicy
		params map[string]any
		want   []string
		usage  ledger.Usage
	}{
		{
			name: "not found", policy: configMapPolicy().Obj(), params: map[string]any{"policy": "gone"},
			want:  []string{`quota: ClaimCreationPolicy "gone": not found`},
			usage: ledger.Usage{Limit: 1, Available: 1},
		},
		{
			name: "older than the constraint", policy: configMapPolicy().Obj(), params: map[string]any{"policy": "configmaps", "generation": int64(2)},
			want:  []string{`quota: ClaimCreationPolicy "configmaps": generation 2 is not loaded yet (have 1); retry`},
			usage: ledger.Usage{Limit: 1, Available: 1},
		},
		{
			name: "newer than the constraint", policy: configMapPolicy().Generation(3).Obj(), params: map[string]any{"policy": "configmaps", "generation": int64(2)},
			usage: ledger.Usage{Limit: 1, Reserved: 1},
		},
		{
			name: "disabled", policy: configMapPolicy().Disabled().Obj(), params: map[string]any{"policy": "configmaps"},
			usage: ledger.Usage{Limit: 1, Available: 1},
		},
		{
			name:   "not Ready",
			policy: configMapPolicy().Ready(metav1.ConditionFalse, quotav1alpha1.ReasonValidationFailed, "no registration").Obj(),
			params: map[string]any{"policy": "configmaps"},
			usage:  ledger.Usage{Limit: 1, Available: 1},
		},
		{
			name:   "Ready",
			policy: configMapPolicy().Ready(metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, "").Obj(),
			params: map[string]any{"policy": "configmaps"},
			usage:  ledger.Usage{Limit: 1, Reserved: 1},
		},
		{
			name: "another trigger kind", policy: builders.ClaimPolicy("configmaps", "v1", "Secret", namespaceOfTrigger).
				Request("core/configmaps", intstr.FromInt32(1)).Obj(),
			params: map[string]any{"policy": "configmaps"},
			usage:  ledger.Usage{Limit: 1, Available: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "quotaclaimpolicy", tc.params)
			h.env.ClaimPolicies = claimpolicies.NewSet(tc.policy)
			h.grant("g", teamA, "core/configmaps", 1)
			assertMessages(t, tc.name, h.review(createAs(alice, "req-1", configMap("team-a", "cm1"))), tc.want...)
			assertUsage(t, h, teamA, "core/configmaps", tc.usage)
		})
	}
}

// templateLocation is where OPA says a builtin was called from in the
// template's own Rego.
var templateLocation = regexp.MustCompile(`^template:\d+: `)

func TestClaimPolicyWithoutPoliciesFailsClosed(t *testing.T) {
	h := newHarness(t, "quotaclaimpolicy", map[string]any{"policy": "configmaps"})
	got := h.review(createAs(alice, "req-1", configMap("team-a", "cm1")))
	for i, m := range got {
		got[i] = templateLocation.ReplaceAllString(m, "")
	}
	assertMessages(t, "no policies", got,
		"eval_builtin_error: quota.policy_claim: no ClaimCreationPolicies configured: the hosting process must set them in the builtins' Env (Env.ClaimPolicies)")
}

// In observe mode (the manager's observer) the claim is recorded with the
// metadata of its view, rendered with no requester.
func TestClaimPolicyObservedRecordsTheClaimWithItsMetadata(t *testing.T) {
	h := policyHarness(t, configMapPolicy().Obj())
	rec := &builtins.Recorder{}
	h.ctx = builtins.WithRecorder(context.Background(), rec)
	cm := configMap("team-a", "cm1")
	cm["metadata"].(map[string]any)["labels"] = map[string]any{"team": "web"}
	assertMessages(t, "observed", h.review(request{op: create, uid: "observe-1", obj: cm}))
	want := []builtins.RecordedClaim{{
		Claim: ledger.Claim{
			ID:       "uid-team-a-cm1",
			Object:   ledger.ObjectRef{Kind: "ConfigMap", Namespace: "team-a", Name: "cm1", UID: "uid-team-a-cm1"},
			Requests: []ledger.Request{{Consumer: teamA, ResourceType: "core/configmaps", Amount: 1, Dimensions: map[string]string{}}},
		},
		Metadata: builtins.ClaimMetadata{View: true,
			Name:        "cm1-claim",
			Labels:      map[string]string{"team": "web"},
			Annotations: map[string]string{"created-by": ""},
		},
	}}
	if diff := cmp.Diff(want, rec.Claims); diff != "" {
		t.Errorf("recorded (-want +got):\n%s", diff)
	}
	assertUsage(t, h, teamA, "core/configmaps", ledger.Usage{})
}
