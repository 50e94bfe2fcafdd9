package webhooks_test

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

func TestWebhooksRejectBadClaims(t *testing.T) {
	needEnv(t)
	const cpu = "t13.example.com/cpu"
	acme := orgRef("acme-t13")
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
		{"another namespace's quota", claimObject("t13-outsider", "c2", nsRef("t13-tenant"), builders.Request(rtConfigMaps, 1, nil)),
			"spec.consumerRef", `Forbidden: a claim in namespace "t13-outsider" may not claim the quota of namespace "t13-tenant"`},
		{"unknown resource type", claimObject("t13-tenant", "c3", acme, builders.Request("t13.example.com/unknown", 1, nil)),
			"spec.requests[0].resourceType", `Invalid value: "t13.example.com/unknown": no ResourceRegistration declares this resource type`},
		{"undeclared dimension", claimObject("t13-tenant", "c4", acme, builders.Request(cpu, 1, map[string]string{"zone": "a"})),
			"spec.requests[0].dimensions[zone]", `Invalid value: "zone": dimension "zone" is not declared by ResourceRegistration "t13-cpu" (it declares region)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testenv.RequireInvalid(t, k8s.Create(ctx, tc.claim), tc.field, tc.want)
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

// A view (a claim the observer writes to show what an object counts) gets
// no finalizer, and no claim becomes a view or stops being one: a decided
// claim labelled a view would stop counting.
func TestTheViewLabelIsSetAtCreationOnly(t *testing.T) {
	needEnv(t)
	const cpu = "t31.example.com/cpu"
	acme := orgRef("acme-t31")
	newRegistration(t, "t31-cpu", cpu, organizationType)
	newNamespace(t, "t31-tenant", tenantOf("acme-t31"))

	view := builders.Claim("view", "t31-tenant").Consumer(acme).Request(cpu, 1, nil).View().Obj()
	if err := k8s.Create(ctx, view); err != nil {
		t.Fatal(err)
	}
	if len(view.Finalizers) != 0 {
		t.Fatalf("a view got finalizers %v", view.Finalizers)
	}
	real := newClaim(t, "t31-tenant", "real", acme, builders.Request(cpu, 1, nil))

	const field = "metadata.labels[" + quotav1alpha1.ViewLabel + "]"
	const msg = "Forbidden: marks a claim the observer writes as a view of what an object counts; it is set at creation and cannot be added, removed or changed"
	patch := client.MergeFrom(real.DeepCopy())
	real.Labels = map[string]string{quotav1alpha1.ViewLabel: "true"}
	testenv.RequireInvalid(t, k8s.Patch(ctx, real, patch), field, msg)
	patch = client.MergeFrom(view.DeepCopy())
	view.Labels = map[string]string{"app": "web"}
	testenv.RequireInvalid(t, k8s.Patch(ctx, view, patch), field, msg)
}
