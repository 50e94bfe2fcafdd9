package controllers_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

func createPolicy(t *testing.T, p client.Object) {
	t.Helper()
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, p) })
}

// wantReady waits for the policy's Ready condition, for its current
// generation, to have status, reason and exactly message.
func wantReady(t *testing.T, p quotav1alpha1.ConditionGetter, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	if got := waitCondition(t, p, quotav1alpha1.ConditionReady, status, reason); got != message {
		t.Fatalf("%s: Ready message\n got %s\nwant %s", p.GetName(), got, message)
	}
}

const readyMessage = "the policy is valid and in use"

func TestPolicyIsReadyWhenItsKindsAndResourceTypesExist(t *testing.T) {
	needEnv(t)
	g := grantPolicyObject("t31-grant", rtConfigMaps)
	createPolicy(t, g)
	wantReady(t, g, metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, readyMessage)
	if g.Status.ObservedGeneration != g.Generation {
		t.Errorf("status.observedGeneration %d, generation %d", g.Status.ObservedGeneration, g.Generation)
	}
	c := claimPolicyObject("t31-claim", rtConfigMaps)
	createPolicy(t, c)
	wantReady(t, c, metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, readyMessage)
}

// Done when: a policy naming an unregistered resource type is admitted with
// Ready=False/ValidationFailed; it turns Ready when the registration
// appears.
func TestPolicyNamingAnUnregisteredResourceTypeTurnsReadyWithItsRegistration(t *testing.T) {
	needEnv(t)
	const rt = "t32.example.com/widgets"
	g := grantPolicyObject("t32-grant", rt)
	createPolicy(t, g)
	c := claimPolicyObject("t32-claim", rt)
	createPolicy(t, c)
	wantReady(t, g, metav1.ConditionFalse, quotav1alpha1.ReasonValidationFailed,
		`spec.target.resourceGrantTemplate.spec.allowances[0].resourceType: Invalid value: "t32.example.com/widgets": no ResourceRegistration declares this resource type`)
	wantReady(t, c, metav1.ConditionFalse, quotav1alpha1.ReasonValidationFailed,
		`spec.target.resourceClaimTemplate.spec.requests[0].resourceType: Invalid value: "t32.example.com/widgets": no ResourceRegistration declares this resource type`)

	// Not Ready, the grant policy acts on nothing.
	newNamespace(t, "t32-tenant", map[string]string{"tenant": "t32"})
	consistently(t, 2*time.Second, "a policy that is not Ready makes no grant", func() error {
		if got := policyGrants(t, "t32-grant"); len(got) != 0 {
			return fmt.Errorf("grants %v", got)
		}
		return nil
	})

	newRegistration(t, "t32-widgets", rt, quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"})
	wantReady(t, g, metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, readyMessage)
	wantReady(t, c, metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, readyMessage)
	// Ready, it grants the labelled namespace its quota.
	gr := waitGrant(t, "t32-tenant", "t32-grant-t32-tenant-grant")
	if got := gr.Spec.Allowances[0].Buckets[0].Amount; got != 10 || gr.Spec.Allowances[0].ResourceType != rt {
		t.Errorf("t32-grant's grant allowances %+v", gr.Spec.Allowances)
	}

	// The registration going away takes the policies' readiness with it.
	deleteAndWait(t, &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "t32-widgets"}})
	wantReady(t, g, metav1.ConditionFalse, quotav1alpha1.ReasonValidationFailed,
		`spec.target.resourceGrantTemplate.spec.allowances[0].resourceType: Invalid value: "t32.example.com/widgets": no ResourceRegistration declares this resource type`)
}

func TestPolicyValidationFailedSaysWhatIsWrong(t *testing.T) {
	needEnv(t)
	cases := []struct {
		name   string
		policy quotav1alpha1.ConditionGetter
		want   string
	}{
		{"trigger kind not served, resource type not registered", func() quotav1alpha1.ConditionGetter {
			p := grantPolicyObject("t33-unserved", "t33.example.com/widgets")
			p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "example.com/v1", Kind: "Widget"}
			return p
		}(), `[spec.trigger.resource: Invalid value: "example.com/v1, Kind=Widget": the API server does not serve this kind, ` +
			`spec.target.resourceGrantTemplate.spec.allowances[0].resourceType: Invalid value: "t33.example.com/widgets": no ResourceRegistration declares this resource type]`},
		{"trigger version not served", func() quotav1alpha1.ConditionGetter {
			p := claimPolicyObject("t33-version", rtConfigMaps)
			p.Spec.Trigger.Resource.APIVersion = "v2"
			return p
		}(), `spec.trigger.resource: Invalid value: "/v2, Kind=ConfigMap": the API server does not serve this kind`},
		{"parent kind not served", func() quotav1alpha1.ConditionGetter {
			p := grantPolicyObject("t33-parent", rtConfigMaps)
			p.Spec.Target.ParentContext = &quotav1alpha1.ParentContext{APIGroup: "example.com", Kind: "Tenant",
				NameExpression: `trigger.metadata.labels["tenant"]`}
			return p
		}(), `spec.target.parentContext: Invalid value: "Tenant.example.com": the API server does not serve this kind`},
		{"namespaced parent kind", func() quotav1alpha1.ConditionGetter {
			p := grantPolicyObject("t33-namespaced-parent", rtConfigMaps)
			p.Spec.Target.ParentContext = &quotav1alpha1.ParentContext{Kind: "ConfigMap", NameExpression: `"settings"`}
			return p
		}(), `spec.target.parentContext: Invalid value: "ConfigMap": the kind is namespaced; a parent is a cluster-scoped kind, whose objects can own grants in any namespace`},
		{"consumer kind not the registration's", func() quotav1alpha1.ConditionGetter {
			p := claimPolicyObject("t33-consumer", rtConfigMaps)
			p.Spec.Target.ResourceClaimTemplate.Spec.ConsumerRef.APIGroup = "resourcemanager.miloapis.com"
			p.Spec.Target.ResourceClaimTemplate.Spec.ConsumerRef.Kind = "Organization"
			return p
		}(), `spec.target.resourceClaimTemplate.spec.consumerRef: Invalid value: "resourcemanager.miloapis.com/Organization": resource type "core/configmaps" is consumed by Namespace (ResourceRegistration "configmaps-per-namespace")`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			createPolicy(t, tc.policy)
			wantReady(t, tc.policy, metav1.ConditionFalse, quotav1alpha1.ReasonValidationFailed, tc.want)
		})
	}

	// A cluster-scoped parent kind the server serves is fine.
	p := grantPolicyObject("t33-namespace-parent", rtConfigMaps)
	p.Spec.Target.ParentContext = &quotav1alpha1.ParentContext{Kind: "Namespace", NameExpression: `trigger.metadata.name`}
	createPolicy(t, p)
	wantReady(t, p, metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, readyMessage)
}

func TestDisabledPolicyIsNotReady(t *testing.T) {
	needEnv(t)
	p := grantPolicyObject("t34-disabled", "t34.example.com/unregistered")
	p.Spec.Disabled = true
	createPolicy(t, p)
	wantReady(t, p, metav1.ConditionFalse, quotav1alpha1.ReasonPolicyDisabled, "spec.disabled is true")

	// Enabling it is a new generation, judged on its own.
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.Disabled = false
	p.Spec.Target.ResourceGrantTemplate.Spec.Allowances[0].ResourceType = rtConfigMaps
	if err := k8s.Patch(ctx, p, patch); err != nil {
		t.Fatal(err)
	}
	wantReady(t, p, metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, readyMessage)
	if p.Generation != 2 || p.Status.ObservedGeneration != 2 {
		t.Errorf("generation %d, observedGeneration %d; want 2 and 2", p.Generation, p.Status.ObservedGeneration)
	}
}
