package controllers_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// Done when: each webhook rejection is asserted with its message, field by
// field, and a rejected object is not stored.
func TestWebhooksRejectBadGrants(t *testing.T) {
	needEnv(t)
	const cpu, held = "t12.example.com/cpu", "t12.example.com/held"
	acme := orgConsumer("acme-t12")
	newRegistration(t, "t12-cpu", cpu, organizationType, "region")
	newGrant(t, "t12-big", acme, builders.Allowance(cpu, math.MaxInt64-10))

	// A registration being deleted (held by a finalizer) is not active.
	heldReg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "t12-held", Finalizers: []string{"quotakeeper-test/hold"}},
		Spec: quotav1alpha1.ResourceRegistrationSpec{ConsumerTypeRef: organizationType, Type: quotav1alpha1.RegistrationTypeAllocation,
			ResourceType: held, BaseUnit: "unit", ClaimingResources: []quotav1alpha1.GroupKind{{Kind: "ConfigMap"}}}}
	if err := k8s.Create(ctx, heldReg); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, heldReg, quotav1alpha1.ConditionActive, metav1.ConditionTrue, quotav1alpha1.ReasonRegistrationActive)
	if err := k8s.Delete(ctx, heldReg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(heldReg), heldReg); err == nil {
			controllerutil.RemoveFinalizer(heldReg, "quotakeeper-test/hold")
			_ = k8s.Update(ctx, heldReg)
		}
	})

	dfw := &metav1.LabelSelector{MatchLabels: map[string]string{"region": "dfw"}}
	cases := []struct {
		name  string
		grant *quotav1alpha1.ResourceGrant
		field string
		want  string
	}{
		{"unknown resource type", grantObject("t12-unknown", acme, builders.Allowance("t12.example.com/unknown", 1)),
			"spec.allowances[0].resourceType", `Invalid value: "t12.example.com/unknown": no ResourceRegistration declares this resource type`},
		{"inactive resource type", grantObject("t12-inactive", acme, builders.Allowance(held, 1)),
			"spec.allowances[0].resourceType", `Invalid value: "t12.example.com/held": ResourceRegistration "t12-held" for this resource type is not active: it is being deleted`},
		{"undeclared dimension", grantObject("t12-zone", acme, builders.SelectedAllowance(cpu, &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}, 1)),
			"spec.allowances[0].buckets[0].dimensionSelector.matchLabels[zone]", `Invalid value: "zone": dimension "zone" is not declared by ResourceRegistration "t12-cpu" (it declares region)`},
		{"malformed selector", grantObject("t12-malformed", acme, builders.SelectedAllowance(cpu, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "region", Operator: metav1.LabelSelectorOpIn}}}, 1)),
			"spec.allowances[0].buckets[0].dimensionSelector.matchExpressions[0].values", "Required value: must be specified when `operator` is 'In' or 'NotIn'"},
		{"amounts overflow", grantObject("t12-overflow", acme, quotav1alpha1.Allowance{ResourceType: cpu, Buckets: []quotav1alpha1.GrantBucket{
			{Amount: math.MaxInt64, DimensionSelector: dfw}, {Amount: 1}}}),
			"spec.allowances[0].buckets[1].amount", `Invalid value: 1: the amounts of t12.example.com/cpu in this grant sum past the int64 maximum 9223372036854775807`},
		{"overflow with the other grants", grantObject("t12-more", acme, builders.Allowance(cpu, 11)),
			"spec.allowances[0]", `Invalid value: "t12.example.com/cpu": with the other grants for resourcemanager.miloapis.com/Organization "acme-t12" (such as "t12-big"), the amounts of t12.example.com/cpu sum past the int64 maximum 9223372036854775807`},
		{"wrong consumer kind", func() *quotav1alpha1.ResourceGrant {
			g := grantObject("t12-kind", nsConsumer(sysNS), builders.Allowance(cpu, 1))
			return g
		}(), "spec.consumerRef", `Invalid value: "Namespace": resource type "t12.example.com/cpu" is consumed by resourcemanager.miloapis.com/Organization (ResourceRegistration "t12-cpu")`},
		{"outside the consumer's namespace", func() *quotav1alpha1.ResourceGrant {
			g := grantObject("t12-elsewhere", acme, builders.Allowance(cpu, 1))
			g.Namespace = "default"
			return g
		}(), "metadata.namespace", `Invalid value: "default": grants for resourcemanager.miloapis.com/Organization "acme-t12" live in namespace "quotakeeper-system", with its buckets`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireInvalid(t, k8s.Create(ctx, tc.grant), tc.field, tc.want)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(tc.grant), &quotav1alpha1.ResourceGrant{}); !apierrors.IsNotFound(err) {
				t.Fatalf("rejected grant stored: %v", err)
			}
		})
	}

	// An update is judged on its new spec.
	g := newGrant(t, "t12-ok", acme, builders.SelectedAllowance(cpu, dfw, 1))
	patch := client.MergeFrom(g.DeepCopy())
	g.Spec.Allowances[0].Buckets[0].DimensionSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	requireInvalid(t, k8s.Patch(ctx, g, patch), "spec.allowances[0].buckets[0].dimensionSelector.matchLabels[tier]",
		`Invalid value: "tier": dimension "tier" is not declared by ResourceRegistration "t12-cpu" (it declares region)`)
}

func TestWebhooksRejectBadClaims(t *testing.T) {
	needEnv(t)
	const cpu = "t13.example.com/cpu"
	acme := orgConsumer("acme-t13")
	newRegistration(t, "t13-cpu", cpu, organizationType, "region")
	newNamespace(t, "t13-tenant", tenantOf("acme-t13"))
	newNamespace(t, "t13-outsider", nil)

	cases := []struct {
		name  string
		claim *quotav1alpha1.ResourceClaim
		field string
		want  string
	}{
		{"namespace not of the consumer", claimObject("t13-outsider", "c1", acme, builders.Request(cpu, 1, nil)),
			"spec.consumerRef", `Forbidden: namespace "t13-outsider" does not belong to resourcemanager.miloapis.com/Organization "acme-t13": it needs the label resourcemanager.miloapis.com/organization=acme-t13`},
		{"another namespace's quota", claimObject("t13-outsider", "c2", nsConsumer("t13-tenant"), builders.Request(rtConfigMaps, 1, nil)),
			"spec.consumerRef", `Forbidden: a claim in namespace "t13-outsider" may not claim the quota of namespace "t13-tenant"`},
		{"unknown resource type", claimObject("t13-tenant", "c3", acme, builders.Request("t13.example.com/unknown", 1, nil)),
			"spec.requests[0].resourceType", `Invalid value: "t13.example.com/unknown": no ResourceRegistration declares this resource type`},
		{"undeclared dimension", claimObject("t13-tenant", "c4", acme, builders.Request(cpu, 1, map[string]string{"zone": "a"})),
			"spec.requests[0].dimensions[zone]", `Invalid value: "zone": dimension "zone" is not declared by ResourceRegistration "t13-cpu" (it declares region)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireInvalid(t, k8s.Create(ctx, tc.claim), tc.field, tc.want)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(tc.claim), &quotav1alpha1.ResourceClaim{}); !apierrors.IsNotFound(err) {
				t.Fatalf("rejected claim stored: %v", err)
			}
		})
	}

	// The mutating webhook gives a claim its finalizer.
	claim := newClaim(t, "t13-tenant", "ok", acme, builders.Request(cpu, 1, map[string]string{"region": "dfw"}))
	if len(claim.Finalizers) != 1 || claim.Finalizers[0] != quotav1alpha1.ClaimFinalizer {
		t.Fatalf("finalizers on create: %v", claim.Finalizers)
	}
	// Stripping the finalizer from a live claim puts it back.
	patch := client.MergeFrom(claim.DeepCopy())
	claim.Finalizers = nil
	if err := k8s.Patch(ctx, claim, patch); err != nil {
		t.Fatal(err)
	}
	if len(claim.Finalizers) != 1 || claim.Finalizers[0] != quotav1alpha1.ClaimFinalizer {
		t.Fatalf("after stripping: finalizers %v", claim.Finalizers)
	}
}

func TestWebhookRejectsBadRegistrationDimensions(t *testing.T) {
	needEnv(t)
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "t14-bad"},
		Spec: quotav1alpha1.ResourceRegistrationSpec{ConsumerTypeRef: organizationType, Type: quotav1alpha1.RegistrationTypeAllocation,
			ResourceType: "t14.example.com/cpu", BaseUnit: "unit", Dimensions: []string{"region", "not a key!"},
			ClaimingResources: []quotav1alpha1.GroupKind{{Kind: "ConfigMap"}}}}
	requireInvalid(t, k8s.Create(ctx, reg), "spec.dimensions[1]",
		`Invalid value: "not a key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`)
}

// withoutClaimValidation runs fn while the claim validating webhook is
// removed from the cluster (as in a cluster that never installed it).
func withoutClaimValidation(t *testing.T, fn func()) {
	t.Helper()
	// A tenant's claim on another namespace's quota is refused again.
	probe := claimObject("default", "probe", nsConsumer("kube-system"), builders.Request(rtConfigMaps, 1, nil))
	withoutValidation(t, "vresourceclaim.quota.miloapis.com", probe, fn)
}

// withoutValidation runs fn while the validating webhook hook is removed
// from the cluster, and puts it back, waiting until the apiserver calls it
// again: until creating probe (dry run) is refused as Invalid.
func withoutValidation(t *testing.T, hook string, probe client.Object, fn func()) {
	t.Helper()
	const config = "validating-webhook-configuration"
	vwc := &admissionv1.ValidatingWebhookConfiguration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: config}, vwc); err != nil {
		t.Fatal(err)
	}
	saved := vwc.DeepCopy()
	restore := func() {
		current := &admissionv1.ValidatingWebhookConfiguration{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: config}, current); err != nil {
			t.Fatal(err)
		}
		current.Webhooks = saved.Webhooks
		if err := k8s.Update(ctx, current); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, settle, hook+" back", func() error {
			err := k8s.Create(ctx, probe.DeepCopyObject().(client.Object), client.DryRunAll)
			if apierrors.IsInvalid(err) {
				return nil
			}
			return fmt.Errorf("%s not back yet: %w", hook, err)
		})
	}
	var kept []admissionv1.ValidatingWebhook
	for _, w := range vwc.Webhooks {
		if w.Name != hook {
			kept = append(kept, w)
		}
	}
	vwc.Webhooks = kept
	if err := k8s.Update(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	defer restore()
	// The apiserver picks the new configuration up from its own informer,
	// so the hook may still be called for a moment: wait until the probe,
	// which the hook refuses, is accepted.
	testenv.Eventually(t, settle, hook+" gone", func() error {
		if err := k8s.Create(ctx, probe.DeepCopyObject().(client.Object), client.DryRunAll); err != nil {
			return fmt.Errorf("%s still called: %w", hook, err)
		}
		return nil
	})
	fn()
}

// Done when: invalid CEL (unknown function, wrong result type, unknown
// variable) is rejected at create with the field path, and nothing is
// stored.
func TestWebhooksRejectPoliciesThatDoNotCompile(t *testing.T) {
	needEnv(t)
	grantCases := []struct {
		name  string
		edit  func(*quotav1alpha1.GrantCreationPolicySpec)
		field string
		want  string
	}{
		{"unknown function", func(s *quotav1alpha1.GrantCreationPolicySpec) {
			s.Trigger.Conditions = append(s.Trigger.Conditions, quotav1alpha1.TriggerCondition{Expression: "invalid_function()"})
		}, "spec.trigger.conditions[1].expression", `Invalid value: "invalid_function()": compilation failed: 1:17: undeclared reference to 'invalid_function' (in container '')`},
		{"wrong result type", func(s *quotav1alpha1.GrantCreationPolicySpec) {
			s.Trigger.Conditions[0].Expression = "trigger.metadata.name"
		}, "spec.trigger.conditions[0].expression", `Invalid value: "trigger.metadata.name": must evaluate to bool but got dyn`},
		{"unknown variable", func(s *quotav1alpha1.GrantCreationPolicySpec) {
			s.Target.ResourceGrantTemplate.Metadata.Annotations = map[string]string{"requested-by": "{{ user.username }}"}
		}, "spec.target.resourceGrantTemplate.metadata.annotations[requested-by]",
			`Invalid value: "{{ user.username }}": compilation failed in {{ user.username }}: 1:1: undeclared reference to 'user' (in container '')`},
	}
	for i, tc := range grantCases {
		t.Run("GrantCreationPolicy "+tc.name, func(t *testing.T) {
			p := grantPolicyObject(fmt.Sprintf("t30-bad-%d", i), rtConfigMaps)
			tc.edit(&p.Spec)
			requireInvalid(t, k8s.Create(ctx, p), tc.field, tc.want)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), &quotav1alpha1.GrantCreationPolicy{}); !apierrors.IsNotFound(err) {
				t.Fatalf("rejected policy stored: %v", err)
			}
		})
	}

	claimCases := []struct {
		name  string
		edit  func(*quotav1alpha1.ClaimCreationPolicySpec)
		field string
		want  string
	}{
		{"unknown function", func(s *quotav1alpha1.ClaimCreationPolicySpec) {
			s.Trigger.Conditions = []quotav1alpha1.TriggerCondition{{Expression: "true"}, {Expression: "invalid_function()"}}
		}, "spec.trigger.conditions[1].expression", `Invalid value: "invalid_function()": compilation failed: 1:17: undeclared reference to 'invalid_function' (in container '')`},
		{"wrong result type", func(s *quotav1alpha1.ClaimCreationPolicySpec) {
			s.Target.ResourceClaimTemplate.Spec.Requests[0].Amount = intstr.FromString("{{ trigger.metadata.name == 'a' }}")
		}, "spec.target.resourceClaimTemplate.spec.requests[0].amount",
			`Invalid value: "{{ trigger.metadata.name == 'a' }}": {{ trigger.metadata.name == 'a' }} must evaluate to int, string or kubernetes.Quantity but got bool`},
		{"unknown variable", func(s *quotav1alpha1.ClaimCreationPolicySpec) {
			s.Target.ResourceClaimTemplate.Spec.ConsumerRef.Name = "{{.parentOrg}}"
		}, "spec.target.resourceClaimTemplate.spec.consumerRef.name",
			`Invalid value: "{{.parentOrg}}": compilation failed in {{.parentOrg}}: 1:1: undeclared reference to 'parentOrg' (in container '')`},
	}
	for i, tc := range claimCases {
		t.Run("ClaimCreationPolicy "+tc.name, func(t *testing.T) {
			p := claimPolicyObject(fmt.Sprintf("t30-bad-%d", i), rtConfigMaps)
			tc.edit(&p.Spec)
			requireInvalid(t, k8s.Create(ctx, p), tc.field, tc.want)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), &quotav1alpha1.ClaimCreationPolicy{}); !apierrors.IsNotFound(err) {
				t.Fatalf("rejected policy stored: %v", err)
			}
		})
	}

	// An update is judged on its new spec.
	p := grantPolicyObject("t30-ok", rtConfigMaps)
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.Trigger.Conditions[0].Expression = "size(trigger.metadata.name)"
	requireInvalid(t, k8s.Patch(ctx, p, patch), "spec.trigger.conditions[0].expression",
		`Invalid value: "size(trigger.metadata.name)": must evaluate to bool but got int`)
}

// A GrantCreationPolicy's name labels every grant it creates, so it must
// be a label value: a longer name is refused at create rather than failing
// every grant.
func TestWebhookRejectsAGrantPolicyNameTooLongForItsLabel(t *testing.T) {
	needEnv(t)
	name := "t30-" + strings.Repeat("n", 60)
	p := grantPolicyObject(name, rtConfigMaps)
	requireInvalid(t, k8s.Create(ctx, p), "metadata.name",
		fmt.Sprintf(`Invalid value: %q: must be no more than 63 bytes (the name is the quota.miloapis.com/policy label of the policy's grants)`, name))
}

// A view (a claim the observer writes to show what an object counts) holds
// nothing: it gets no finalizer, the claim controller never decides it, it
// goes at once when deleted, and no claim becomes a view or stops being one
// (a decided claim labelled a view would stop counting).
func TestViewClaimsAreNeitherDecidedNorHeld(t *testing.T) {
	needEnv(t)
	const cpu = "t31.example.com/cpu"
	acme := orgConsumer("acme-t31")
	newRegistration(t, "t31-cpu", cpu, organizationType)
	newNamespace(t, "t31-tenant", tenantOf("acme-t31"))

	view := claimObject("t31-tenant", "view", acme, builders.Request(cpu, 1, nil))
	view.Labels = map[string]string{quotav1alpha1.ViewLabel: "true"}
	if err := k8s.Create(ctx, view); err != nil {
		t.Fatal(err)
	}
	if len(view.Finalizers) != 0 {
		t.Fatalf("a view got finalizers %v", view.Finalizers)
	}
	// A claim made after the view is decided: the controller has had its
	// chance at the view.
	real := waitDecided(t, newClaim(t, "t31-tenant", "real", acme, builders.Request(cpu, 1, nil)))
	if c := grantedCondition(real); c.Status != metav1.ConditionFalse || c.Reason != quotav1alpha1.ReasonQuotaExceeded {
		t.Fatalf("the claim after the view: %+v", c)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(view), view); err != nil {
		t.Fatal(err)
	}
	if len(view.Status.Conditions) != 0 || len(view.Status.Allocations) != 0 || len(view.Finalizers) != 0 {
		t.Fatalf("the claim controller touched a view: finalizers %v status %+v", view.Finalizers, view.Status)
	}

	const field = "metadata.labels[" + quotav1alpha1.ViewLabel + "]"
	const msg = "Forbidden: marks a claim the observer writes as a view of what an object counts; it is set at creation and cannot be added, removed or changed"
	patch := client.MergeFrom(real.DeepCopy())
	real.Labels = map[string]string{quotav1alpha1.ViewLabel: "true"}
	requireInvalid(t, k8s.Patch(ctx, real, patch), field, msg)
	patch = client.MergeFrom(view.DeepCopy())
	view.Labels = map[string]string{"app": "web"}
	requireInvalid(t, k8s.Patch(ctx, view, patch), field, msg)

	if err := k8s.Delete(ctx, view); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(view), view); !apierrors.IsNotFound(err) {
		t.Fatalf("a deleted view is still there (%v): finalizers %v", err, view.Finalizers)
	}
}
