package webhooks_test

import (
	"math"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// Done when: each webhook rejection is asserted with its message, field by
// field, and a rejected object is not stored.
func TestWebhooksRejectBadGrants(t *testing.T) {
	needEnv(t)
	const cpu, held = "t12.example.com/cpu", "t12.example.com/held"
	acme := orgRef("acme-t12")
	newRegistration(t, "t12-cpu", cpu, organizationType, "region")
	newGrant(t, "t12-big", acme, builders.Allowance(cpu, math.MaxInt64-10))

	// A registration being deleted (held by a finalizer) is not active.
	heldReg := registration("t12-held", held, organizationType).Finalizer("quotakeeper-test/hold").Obj()
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
			g := grantObject("t12-kind", nsRef(sysNS), builders.Allowance(cpu, 1))
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
			testenv.RequireInvalid(t, k8s.Create(ctx, tc.grant), tc.field, tc.want)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(tc.grant), &quotav1alpha1.ResourceGrant{}); !apierrors.IsNotFound(err) {
				t.Fatalf("rejected grant stored: %v", err)
			}
		})
	}

	// An update is judged on its new spec.
	g := newGrant(t, "t12-ok", acme, builders.SelectedAllowance(cpu, dfw, 1))
	patch := client.MergeFrom(g.DeepCopy())
	g.Spec.Allowances[0].Buckets[0].DimensionSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	testenv.RequireInvalid(t, k8s.Patch(ctx, g, patch), "spec.allowances[0].buckets[0].dimensionSelector.matchLabels[tier]",
		`Invalid value: "tier": dimension "tier" is not declared by ResourceRegistration "t12-cpu" (it declares region)`)
}
