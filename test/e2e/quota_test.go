package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// With a grant of 3, three ConfigMaps are admitted, the fourth is denied
// with requested/available/limit, and deleting one lets the next in. The
// bucket counts what exists, observed: no per-object records.
func TestEntityQuota(t *testing.T) {
	t.Parallel()
	const ns, rt = "e2e-entity", "e2e.quota/entity-configmaps"
	namespace(t, ns, nil)
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	grant(t, "configmaps", consumer, rt, 3)
	quotaEntity(t, "e2e-entity", []string{ns}, map[string]any{"resourceType": rt, "claimViews": true})

	for i := 1; i <= 3; i++ {
		mustAdmit(t, ns, fmt.Sprintf("cm-%d", i))
	}
	mustDeny(t, ns, "cm-4", "requested 1 of "+rt, "available 0 of 3")

	// The observer counts the admitted objects and folds their reservations.
	waitBucket(t, consumer, rt, 3, 0)
	if st := bucket(t, consumer, rt); st.ClaimCount != 3 || len(st.Reservations) != 0 {
		t.Fatalf("claimCount %d reservations %+v, want 3 counted objects and none in flight", st.ClaimCount, st.Reservations)
	}
	assertNamespaces(t, consumer, rt, map[string]int64{ns: 3})
	// Admission writes no ResourceClaim; the manager writes one view per
	// counted object, and nothing else.
	for i := 1; i <= 3; i++ {
		waitView(t, ns, fmt.Sprintf("cm-%d", i), consumer, rt)
	}
	requireOnlyViews(t, ns, 3)

	if err := cluster.Client.Delete(context.Background(), configMap(ns, "cm-1", nil)); err != nil {
		t.Fatal(err)
	}
	waitBucket(t, consumer, rt, 2, 0)
	if st := bucket(t, consumer, rt); st.ClaimCount != 2 {
		t.Fatalf("claimCount %d after a delete, want 2", st.ClaimCount)
	}
	testenv.Eventually(t, time.Minute, "cm-1's view gone with it", func() error {
		if v := views(t, ns); len(v) != 2 || v["cm-1"] != nil {
			return fmt.Errorf("views of %v", keysOf(v))
		}
		return nil
	})
	mustAdmit(t, ns, "cm-5")
	mustDeny(t, ns, "cm-6", "available 0 of 3")
}

// Two namespaces labelled for one organization share its bucket.
func TestSharedQuotaAcrossNamespaces(t *testing.T) {
	t.Parallel()
	const rt = "e2e.quota/shared-configmaps"
	labels := map[string]string{quotav1alpha1.ConsumerLabelKey(orgGroup, "Organization"): "e2e-shared"}
	namespace(t, "e2e-shared-a", labels)
	namespace(t, "e2e-shared-b", labels)
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, orgConsumer)
	org := quotav1alpha1.ConsumerRef{APIGroup: orgGroup, Kind: "Organization", Name: "e2e-shared"}
	grant(t, "e2e-shared", org, rt, 3)
	quotaEntity(t, "e2e-shared", []string{"e2e-shared-a", "e2e-shared-b"}, map[string]any{
		"resourceType": rt,
		"consumers":    []any{map[string]any{"apiGroup": orgGroup, "kind": "Organization"}},
	})

	mustAdmit(t, "e2e-shared-a", "one")
	mustAdmit(t, "e2e-shared-a", "two")
	mustAdmit(t, "e2e-shared-b", "three")
	mustDeny(t, "e2e-shared-b", "four", "available 0 of 3")
	mustDeny(t, "e2e-shared-a", "four", "available 0 of 3")
	waitBucket(t, org, rt, 3, 0)
	assertNamespaces(t, org, rt, map[string]int64{"e2e-shared-a": 2, "e2e-shared-b": 1})
}

// A project (namespace) grant of 5 under an organization grant of 3 admits
// 3: the most restrictive cap wins.
func TestCapOverGroup(t *testing.T) {
	t.Parallel()
	const ns, projectRT, orgRT = "e2e-cap", "e2e.quota/cap-project-configmaps", "e2e.quota/cap-org-configmaps"
	namespace(t, ns, map[string]string{quotav1alpha1.ConsumerLabelKey(orgGroup, "Organization"): "e2e-capco"})
	registration(t, projectRT, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	registration(t, orgRT, quotav1alpha1.RegistrationTypeEntity, orgConsumer)
	project := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	org := quotav1alpha1.ConsumerRef{APIGroup: orgGroup, Kind: "Organization", Name: "e2e-capco"}
	grant(t, "project-cap", project, projectRT, 5)
	grant(t, "e2e-capco", org, orgRT, 3)
	quotaEntity(t, "e2e-cap", []string{ns}, map[string]any{
		"resourceType": projectRT,
		"consumers": []any{
			map[string]any{"kind": "Namespace"},
			map[string]any{"apiGroup": orgGroup, "kind": "Organization", "resourceType": orgRT},
		},
	})
	for i := 1; i <= 3; i++ {
		mustAdmit(t, ns, fmt.Sprintf("cm-%d", i))
	}
	mustDeny(t, ns, "cm-4", "requested 1 of "+orgRT, "available 0 of 3")
	// The refusal took nothing from the project bucket.
	waitBucket(t, project, projectRT, 3, 0)
	waitBucket(t, org, orgRT, 3, 0)
}

// An owning service creates ResourceClaims and waits for the decision. A
// granted claim is reserved by the claim controller, then counted by the
// observer (which folds the reservation); deleting it returns its amount.
func TestAllocationClaims(t *testing.T) {
	t.Parallel()
	const ns, rt = "e2e-alloc", "e2e.quota/cpu-millicores"
	namespace(t, ns, nil)
	registration(t, rt, quotav1alpha1.RegistrationTypeAllocation, namespaceConsumer)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	grant(t, "cpu", consumer, rt, 4000)

	decide := func(name string, amount int64) *quotav1alpha1.ResourceClaim {
		claim := builders.Claim(name, ns).Consumer(consumer).Request(rt, amount, nil).Obj()
		create(t, claim)
		testenv.Eventually(t, time.Minute, "claim "+name+" decided", func() error {
			if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(claim), claim); err != nil {
				return err
			}
			if c := meta.FindStatusCondition(claim.Status.Conditions, quotav1alpha1.ConditionGranted); c == nil || c.Reason == quotav1alpha1.ReasonPendingEvaluation {
				return fmt.Errorf("conditions %+v", claim.Status.Conditions)
			}
			return nil
		})
		return claim
	}
	granted := decide("instance-a", 3000)
	c := meta.FindStatusCondition(granted.Status.Conditions, quotav1alpha1.ConditionGranted)
	if c.Status != metav1.ConditionTrue || c.Reason != quotav1alpha1.ReasonQuotaAvailable {
		t.Fatalf("3000 of 4000: %+v", c)
	}
	denied := decide("instance-b", 2000)
	c = meta.FindStatusCondition(denied.Status.Conditions, quotav1alpha1.ConditionGranted)
	if c.Status != metav1.ConditionFalse || c.Reason != quotav1alpha1.ReasonQuotaExceeded {
		t.Fatalf("2000 more: %+v", c)
	}
	waitBucket(t, consumer, rt, 3000, 0)
	if err := cluster.Client.Delete(context.Background(), granted); err != nil {
		t.Fatal(err)
	}
	waitBucket(t, consumer, rt, 0, 0)
}
