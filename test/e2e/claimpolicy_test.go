package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/claimpolicies"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// Issue 11's ClaimCreationPolicy at admission: the manager keeps a
// QuotaClaimPolicy constraint per Ready policy, Gatekeeper enforces it with
// the policy's CEL, and the observer counts what it claims.

// claimPolicy creates the policy and waits until it is Ready and every
// Gatekeeper replica enforces its constraint.
func claimPolicy(t *testing.T, p *quotav1alpha1.ClaimCreationPolicy) {
	t.Helper()
	create(t, p)
	testenv.Eventually(t, time.Minute, "ClaimCreationPolicy "+p.Name+" Ready", func() error {
		got := &quotav1alpha1.ClaimCreationPolicy{}
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
			return err
		}
		if !quotav1alpha1.IsTrue(got.Status.Conditions, quotav1alpha1.ConditionReady, got.Generation) {
			return fmt.Errorf("conditions %+v", got.Status.Conditions)
		}
		return nil
	})
	waitEnforced(t, claimpolicies.ConstraintGVK, p.Name)
}

// Done when: a ClaimCreationPolicy with a grant of 2 admits two objects
// (claims Granted, owned, labelled) and denies the third, and deleting an
// object returns its quota.
func TestClaimCreationPolicyAdmitsUpToTheGrant(t *testing.T) {
	const ns, rt = "e2e-ccp", "e2e.quota/ccp-configmaps"
	namespace(t, ns, nil)
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	grant(t, "ccp-configmaps", consumer, rt, 2)
	// The constraint matches every ConfigMap; the condition chooses this
	// test's namespace.
	claimPolicy(t, builders.ClaimPolicy("e2e-ccp-configmaps", "v1", "ConfigMap",
		quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: "{{ trigger.metadata.namespace }}"}).
		Condition(`trigger.metadata.namespace == "`+ns+`"`).
		ClaimName("{{ trigger.metadata.name }}-claim").
		ClaimLabel("team", `{{ trigger.metadata.?labels.team.orValue("none") }}`).
		ClaimAnnotation("quota.example.com/object", "{{ trigger.metadata.name }}").
		Request(rt, intstr.FromInt32(1)).Obj())

	if err := cluster.Client.Create(context.Background(), configMap(ns, "cm-1", map[string]string{"team": "web"})); err != nil {
		t.Fatalf("cm-1 denied: %v", err)
	}
	mustAdmit(t, ns, "cm-2")
	waitBucket(t, consumer, rt, 2, 0)
	err := createConfigMap(ns, "cm-3")
	want := denial("e2e-ccp-configmaps", "quota exceeded for Namespace "+ns+": requested 1 of "+rt+", available 0 of 2 (allocated 2, reserved 0)"+seeEffective(ns, consumer, rt))
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("cm-3: got %v\nwant %s", err, want)
	}

	cm1 := waitViewOf(t, ns, "cm-1", consumer, rt, viewMeta{name: "cm-1-claim",
		labels: map[string]string{"team": "web"}, annotations: map[string]string{"quota.example.com/object": "cm-1"}})
	waitViewOf(t, ns, "cm-2", consumer, rt, viewMeta{name: "cm-2-claim",
		labels: map[string]string{"team": "none"}, annotations: map[string]string{"quota.example.com/object": "cm-2"}})

	if err := cluster.Client.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm-1"}}); err != nil {
		t.Fatal(err)
	}
	waitBucket(t, consumer, rt, 1, 0)
	mustAdmit(t, ns, "cm-3")
	waitBucket(t, consumer, rt, 2, 0)
	testenv.Eventually(t, time.Minute, "the view of the deleted cm-1 gone", func() error {
		err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(cm1), &quotav1alpha1.ResourceClaim{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
}

// Any CEL error at admission denies with its message (Milo fails open here);
// an object that existed before the policy is counted the same way.
func TestClaimCreationPolicyCELErrorDenies(t *testing.T) {
	const ns, rt = "e2e-ccp-payload", "e2e.quota/ccp-payload-bytes"
	namespace(t, ns, nil)
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	grant(t, "ccp-payload-bytes", consumer, rt, 10)
	withPayload := func(name, payload string) *corev1.ConfigMap {
		cm := configMap(ns, name, nil)
		cm.Data = map[string]string{"payload": payload}
		return cm
	}
	create(t, withPayload("before", "123"))

	claimPolicy(t, builders.ClaimPolicy("e2e-ccp-payload", "v1", "ConfigMap",
		quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: ns}).
		Condition(`trigger.metadata.namespace == "`+ns+`"`).
		Request(rt, intstr.FromString("{{ size(trigger.data.payload) }}")).Obj())
	waitBucket(t, consumer, rt, 3, 0)

	err := createConfigMap(ns, "no-payload")
	want := denial("e2e-ccp-payload", `quota: ClaimCreationPolicy "e2e-ccp-payload": `+
		`spec.target.resourceClaimTemplate.spec.requests[0].amount: Invalid value: "{{ size(trigger.data.payload) }}": evaluation failed: no such key: data`)
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("no-payload: got %v\nwant %s", err, want)
	}
	if err := cluster.Client.Create(context.Background(), withPayload("payload-5", "12345")); err != nil {
		t.Fatalf("payload-5 denied: %v", err)
	}
	waitBucket(t, consumer, rt, 8, 0)
	err = cluster.Client.Create(context.Background(), withPayload("payload-3", "123"))
	want = denial("e2e-ccp-payload", "quota exceeded for Namespace "+ns+": requested 3 of "+rt+", available 2 of 10 (allocated 8, reserved 0)"+seeEffective(ns, consumer, rt))
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("payload-3: got %v\nwant %s", err, want)
	}
	// The object that predates the policy has its view like the others.
	testenv.Eventually(t, time.Minute, "a view per counted ConfigMap", func() error {
		got := keysOf(views(t, ns))
		slices.Sort(got)
		if want := []string{"before", "payload-5"}; !slices.Equal(got, want) {
			return fmt.Errorf("views of %v, want %v", got, want)
		}
		return nil
	})
}

// Invalid CEL is refused at create by the manager's webhook, with the field
// path, and nothing is stored (the envtest suites in controllers cover each
// kind of mistake).
func TestClaimCreationPolicyInvalidCELIsRefused(t *testing.T) {
	p := builders.ClaimPolicy("e2e-ccp-invalid", "v1", "ConfigMap",
		quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: "{{ trigger.metadata.namespace }}"}).
		Condition("true").Condition("invalid_function()").
		Request("e2e.quota/ccp-configmaps", intstr.FromInt32(1)).Obj()
	err := cluster.Client.Create(context.Background(), p)
	const field = "spec.trigger.conditions[1].expression"
	const want = `Invalid value: "invalid_function()": compilation failed: 1:17: undeclared reference to 'invalid_function' (in container '')`
	status, ok := errors.AsType[*apierrors.StatusError](err)
	if !ok || !apierrors.IsInvalid(err) || status.Status().Details == nil {
		t.Fatalf("want Invalid with details, got %v", err)
	}
	if causes := status.Status().Details.Causes; len(causes) != 1 || causes[0].Field != field || causes[0].Message != want {
		t.Fatalf("causes %+v, want one: %s: %s", causes, field, want)
	}
	if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(p), &quotav1alpha1.ClaimCreationPolicy{}); !apierrors.IsNotFound(err) {
		t.Fatalf("refused policy stored: %v", err)
	}
}
