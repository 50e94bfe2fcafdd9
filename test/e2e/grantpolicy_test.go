package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// A GrantCreationPolicy provisions a tenant's quota from its namespace's
// tier label, and Gatekeeper enforces it: the manager process makes the
// grant (owned by the namespace), follows a relabel, and deletes the grant
// when the label goes or the namespace is deleted.
func TestGrantPolicyProvisionsWhatGatekeeperEnforces(t *testing.T) {
	t.Parallel()
	const ns, rt, tier = "e2e-tenant", "e2e.quota/policy-configmaps", "e2e.quota/tier"
	ctx := context.Background()
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	policy := builders.GrantPolicy("e2e-tenant-tier", "v1", "Namespace", quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: "{{ trigger.metadata.name }}"}).
		Condition(fmt.Sprintf(`trigger.metadata.?labels[?%q].orValue("") != ""`, tier)).
		TargetName("tier-{{ trigger.metadata.name }}").
		Allowance(rt, intstr.FromString(fmt.Sprintf(`{{ trigger.metadata.labels[%q] == "gold" ? 2 : 1 }}`, tier))).Obj()
	create(t, policy)
	testenv.Eventually(t, time.Minute, "policy Ready", func() error {
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
			return err
		}
		if !quotav1alpha1.IsTrue(policy.Status.Conditions, quotav1alpha1.ConditionReady, policy.Generation) {
			return fmt.Errorf("conditions %+v", policy.Status.Conditions)
		}
		return nil
	})

	namespace(t, ns, map[string]string{tier: "gold"})
	nsObj := &corev1.Namespace{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	g := waitPolicyGrant(t, ns, "tier-"+ns, 2)
	wantOwners := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: ns, UID: nsObj.UID, Controller: ptr.To(true)}}
	if diff := cmp.Diff(wantOwners, g.OwnerReferences); diff != "" {
		t.Errorf("grant owners (-want +got):\n%s", diff)
	}
	if g.Labels[quotav1alpha1.LabelPolicy] != policy.Name || g.Labels[quotav1alpha1.LabelTriggerUID] != string(nsObj.UID) {
		t.Errorf("grant labels %v", g.Labels)
	}

	const constraint = "e2e-tenant-tier"
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	quotaEntity(t, constraint, []string{ns}, map[string]any{"resourceType": rt})
	mustAdmit(t, ns, "cm-1")
	mustAdmit(t, ns, "cm-2")
	waitBucket(t, consumer, rt, 2, 0)
	mustDenyExactly(t, ns, "cm-3", denial(constraint, "quota exceeded for Namespace "+ns+": requested 1 of "+rt+", available 0 of 2 (allocated 2, reserved 0)"+seeEffective(ns, consumer, rt)))

	// Silver gives 1: the grant is updated in place, and the bucket's limit
	// follows.
	relabel(t, ns, map[string]string{tier: "silver"})
	if up := waitPolicyGrant(t, ns, "tier-"+ns, 1); up.UID != g.UID {
		t.Errorf("the relabel replaced the grant (uid %s, was %s) instead of updating it", up.UID, g.UID)
	}
	waitLimit(t, consumer, rt, 1)
	mustDenyExactly(t, ns, "cm-4", denial(constraint, "quota exceeded for Namespace "+ns+": requested 1 of "+rt+", available 0 of 1 (allocated 2, reserved 0)"+seeEffective(ns, consumer, rt)))

	// No tier, no grant: the namespace has no quota left.
	relabel(t, ns, nil)
	waitNoPolicyGrant(t, ns, "tier-"+ns)
	waitLimit(t, consumer, rt, 0)
	mustDenyExactly(t, ns, "cm-5", denial(constraint, "quota exceeded for Namespace "+ns+": requested 1 of "+rt+", available 0 of 0 (allocated 2, reserved 0)"+seeEffective(ns, consumer, rt)))

	// A namespace being deleted loses its grant (this bed runs no namespace
	// controller: the namespace stays Terminating, which counts as gone).
	relabel(t, ns, map[string]string{tier: "gold"})
	waitPolicyGrant(t, ns, "tier-"+ns, 2)
	if err := cluster.Client.Delete(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	waitNoPolicyGrant(t, ns, "tier-"+ns)
}

// mustDenyExactly creates a ConfigMap and requires Gatekeeper's denial to
// become exactly want (Gatekeeper's replicas see a changed grant a moment
// after the bucket does). Every attempt must be denied: the namespace is at
// or over its limit throughout.
func mustDenyExactly(t *testing.T, namespace, name, want string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "denial of "+namespace+"/"+name, func() error {
		err := createConfigMap(namespace, name)
		if err == nil {
			t.Fatalf("ConfigMap %s/%s admitted past the limit", namespace, name)
		}
		if !apierrors.IsForbidden(err) || err.Error() != want {
			return fmt.Errorf("\n got %w\nwant %s", err, want)
		}
		return nil
	})
}

// waitLimit waits for the bucket's limit: what Gatekeeper's plugin decides
// with follows the grants the manager wrote.
func waitLimit(t *testing.T, consumer quotav1alpha1.ConsumerRef, resourceType string, limit int64) {
	t.Helper()
	testenv.Eventually(t, time.Minute, fmt.Sprintf("limit %d of %s", limit, resourceType), func() error {
		st, err := getBucket(consumer, resourceType)
		if err != nil {
			return err
		}
		if st.Limit != limit {
			return fmt.Errorf("limit %d", st.Limit)
		}
		return nil
	})
}

func relabel(t *testing.T, ns string, labels map[string]string) {
	t.Helper()
	obj := &corev1.Namespace{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: ns}, obj); err != nil {
		t.Fatal(err)
	}
	obj.Labels = labels
	if err := cluster.Client.Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// waitPolicyGrant waits for the grant to be Active with amount, and
// returns it.
func waitPolicyGrant(t *testing.T, ns, name string, amount int64) *quotav1alpha1.ResourceGrant {
	t.Helper()
	g := &quotav1alpha1.ResourceGrant{}
	testenv.Eventually(t, time.Minute, fmt.Sprintf("grant %s/%s Active with %d", ns, name, amount), func() error {
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, g); err != nil {
			return err
		}
		if got := g.Spec.Allowances[0].Buckets[0].Amount; got != amount {
			return fmt.Errorf("amount %d", got)
		}
		if c := meta.FindStatusCondition(g.Status.Conditions, quotav1alpha1.ConditionActive); c == nil ||
			c.Status != metav1.ConditionTrue || c.ObservedGeneration != g.Generation {
			return fmt.Errorf("Active %+v", c)
		}
		return nil
	})
	return g
}

func waitNoPolicyGrant(t *testing.T, ns, name string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "grant "+ns+"/"+name+" gone", func() error {
		err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &quotav1alpha1.ResourceGrant{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there")
	})
}
