package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/claimpolicies"
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
	t.Parallel()
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
		TargetName("{{ trigger.metadata.name }}-claim").
		TargetLabel("team", `{{ trigger.metadata.?labels.team.orValue("none") }}`).
		TargetAnnotation("quota.example.com/object", "{{ trigger.metadata.name }}").
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
	t.Parallel()
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
	t.Parallel()
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

// An edit of a ClaimCreationPolicy's spec (here its amount, written two
// ways that count the same) keeps its QuotaClaimPolicy constraint, the same
// object, while the new generation is judged: removed and made again, as it
// was, the policy's objects went unchecked until Gatekeeper had loaded the
// new constraint, and with the bucket full (2 bytes of 2) creates racing
// five edits were admitted 45 times. Creates from four goroutines for 2 s
// after each edit: every one is denied, and the bucket stays at the truth.
func TestAClaimPolicyEditLeavesNothingUnchecked(t *testing.T) {
	const ns, rt, policy = "e2e-ccp-edit", "e2e.quota/ccp-edit-bytes", "e2e-ccp-edit-bytes"
	namespace(t, ns, nil)
	registration(t, rt, quotav1alpha1.RegistrationTypeAllocation, namespaceConsumer)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	grant(t, "bytes", consumer, rt, 2)
	claimPolicy(t, builders.ClaimPolicy(policy, "v1", "ConfigMap",
		quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: "{{ trigger.metadata.namespace }}"}).
		Condition(`trigger.metadata.namespace == "`+ns+`"`).
		Request(rt, intstr.FromString(payloadAmounts[0])).Obj())
	create(t, payloadConfigMap(ns, "full", 2))
	waitBucket(t, consumer, rt, 2, 0)
	constraintUID := func() k8stypes.UID {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(claimpolicies.ConstraintGVK)
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: policy}, u); err != nil {
			t.Fatalf("the policy's constraint: %v", err)
		}
		return u.GetUID()
	}
	uid := constraintUID()

	var attempts, admitted atomic.Int64
	for i := range 5 {
		p := &quotav1alpha1.ClaimCreationPolicy{}
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: policy}, p); err != nil {
			t.Fatal(err)
		}
		p.Spec.Target.ResourceClaimTemplate.Spec.Requests[0].Amount = intstr.FromString(payloadAmounts[(i+1)%2])
		if err := cluster.Client.Update(context.Background(), p); err != nil {
			t.Fatalf("edit %d: %v", i, err)
		}
		var wg sync.WaitGroup
		deadline := time.Now().Add(2 * time.Second)
		for range 4 {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					name := fmt.Sprintf("x-%d", attempts.Add(1))
					err := cluster.Client.Create(context.Background(), payloadConfigMap(ns, name, 1))
					switch {
					case err == nil:
						admitted.Add(1)
					case !apierrors.IsForbidden(err):
						t.Errorf("create %s: %v", name, err)
					}
				}
			})
		}
		wg.Wait()
		if got := constraintUID(); got != uid {
			t.Errorf("edit %d: the constraint was made again (uid %s, was %s)", i, got, uid)
			uid = got
		}
	}
	if admitted.Load() != 0 {
		t.Fatalf("%d of %d creates of 1 byte admitted with the bucket full (2 of 2) while the policy was edited", admitted.Load(), attempts.Load())
	}
	waitBucket(t, consumer, rt, 2, 0)
	var list corev1.ConfigMapList
	if err := cluster.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "full" {
		t.Fatalf("%d live ConfigMaps, want only full", len(list.Items))
	}
	t.Logf("%d creates denied across five edits", attempts.Load())
}
