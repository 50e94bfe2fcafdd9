package controllers_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

// Done when: a grant of projects 3 / cpu 4000 yields buckets {3,0,3} and
// {4000,0,4000}; a second grant of 2 / 2000 makes them {5,0,5} and
// {6000,0,6000}; a claim of 1 project is Granted, held as a reservation
// under the claim's uid, and once observed the bucket becomes {5,1,4}.
func TestGrantsMakeBucketsAndAClaimTakesFromThem(t *testing.T) {
	needEnv(t)
	const projects, cpu = "t1.example.com/projects", "t1.example.com/cpu"
	acme := orgConsumer("acme-t1")
	newRegistration(t, "t1-projects", projects, organizationType)
	newRegistration(t, "t1-cpu", cpu, organizationType)
	newNamespace(t, "t1-tenant", tenantOf("acme-t1"))

	newGrant(t, "t1-base", acme, builders.Allowance(projects, 3), builders.Allowance(cpu, 4000))
	wantBucket(t, bucketKey(acme, projects, nil), usage{3, 0, 0, 3})
	wantBucket(t, bucketKey(acme, cpu, nil), usage{4000, 0, 0, 4000})

	newGrant(t, "t1-more", acme, builders.Allowance(projects, 2), builders.Allowance(cpu, 2000))
	b := wantBucket(t, bucketKey(acme, projects, nil), usage{5, 0, 0, 5})
	wantBucket(t, bucketKey(acme, cpu, nil), usage{6000, 0, 0, 6000})
	wantRefs := []quotav1alpha1.ContributingGrantRef{
		{Name: "t1-base", Namespace: sysNS, BucketIndex: 0, Amount: 3, ObservedGeneration: 1},
		{Name: "t1-more", Namespace: sysNS, BucketIndex: 0, Amount: 2, ObservedGeneration: 1},
	}
	if diff := cmp.Diff(wantRefs, b.Status.ContributingGrantRefs); diff != "" || b.Namespace != sysNS {
		t.Fatalf("bucket in %s, want %s; contributing grants (-want +got):\n%s", b.Namespace, sysNS, diff)
	}

	claim := waitDecided(t, newClaim(t, "t1-tenant", "one-project", acme, builders.Request(projects, 1, nil)))
	cond := grantedCondition(claim)
	if cond.Status != metav1.ConditionTrue || cond.Reason != quotav1alpha1.ReasonQuotaAvailable ||
		cond.Message != "granted 1 of t1.example.com/projects: available 4 of 5 (allocated 0, reserved 1)" {
		t.Fatalf("Granted condition %+v", cond)
	}
	want := []quotav1alpha1.RequestAllocation{{
		ResourceType: projects, Status: quotav1alpha1.AllocationGranted, Reason: quotav1alpha1.ReasonQuotaAvailable,
		Message:         "granted 1 of t1.example.com/projects: available 4 of 5 (allocated 0, reserved 1)",
		AllocatedAmount: 1, AllocatingBucket: bucketKey(acme, projects, nil).Name(),
	}}
	got := claim.Status.Allocations
	for i := range got {
		got[i].LastTransitionTime = metav1.Time{}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("allocations (-want +got):\n%s", diff)
	}
	if claim.Status.ObservedGeneration != claim.Generation || len(claim.Finalizers) != 1 || claim.Finalizers[0] != quotav1alpha1.ClaimFinalizer {
		t.Fatalf("observedGeneration %d (generation %d), finalizers %v", claim.Status.ObservedGeneration, claim.Generation, claim.Finalizers)
	}
	b = wantBucket(t, bucketKey(acme, projects, nil), usage{5, 0, 1, 4})
	wantRes := []quotav1alpha1.Reservation{{ID: string(claim.UID), Amount: 1, Object: quotav1alpha1.ObjectRef{
		APIGroup: quotav1alpha1.GroupVersion.Group, Kind: "ResourceClaim", Namespace: "t1-tenant", Name: "one-project", UID: string(claim.UID)}}}
	if diff := cmp.Diff(wantRes, b.Status.Reservations, cmpopts.IgnoreFields(quotav1alpha1.Reservation{}, "ExpiresAt")); diff != "" {
		t.Fatalf("reservations (-want +got):\n%s", diff)
	}
	requireAgreement(t, acme)

	// The observer counts the Granted claim and folds its reservation.
	observeClaims(t, acme)
	b = wantBucket(t, bucketKey(acme, projects, nil), usage{5, 1, 0, 4})
	if diff := cmp.Diff([]quotav1alpha1.NamespaceUsage{{Namespace: "t1-tenant", Allocated: 1}}, b.Status.Namespaces); diff != "" || b.Status.ClaimCount != 1 {
		t.Fatalf("claimCount %d, namespaces (-want +got):\n%s", b.Status.ClaimCount, diff)
	}
	wantBucket(t, bucketKey(acme, cpu, nil), usage{6000, 0, 0, 6000})
	requireAgreement(t, acme)
}

// Deleting or shrinking a grant lowers limits and revokes nothing: the
// bucket goes over its limit (OverLimit) and the claim stays Granted.
func TestLoweringGrantsRevokesNothing(t *testing.T) {
	needEnv(t)
	const rt = "t2.example.com/projects"
	acme := orgConsumer("acme-t2")
	newRegistration(t, "t2-projects", rt, organizationType)
	newNamespace(t, "t2-tenant", tenantOf("acme-t2"))
	g1 := newGrant(t, "t2-a", acme, builders.Allowance(rt, 3))
	g2 := newGrant(t, "t2-b", acme, builders.Allowance(rt, 2))
	key := bucketKey(acme, rt, nil)
	wantBucket(t, key, usage{5, 0, 0, 5})
	claim := waitDecided(t, newClaim(t, "t2-tenant", "four", acme, builders.Request(rt, 4, nil)))
	if grantedCondition(claim).Status != metav1.ConditionTrue {
		t.Fatalf("claim not granted: %+v", grantedCondition(claim))
	}
	wantBucket(t, key, usage{5, 0, 4, 1})
	observeClaims(t, acme)
	wantBucket(t, key, usage{5, 4, 0, 1})

	patch := client.MergeFrom(g2.DeepCopy())
	g2.Spec.Allowances[0].Buckets[0].Amount = 1
	if err := k8s.Patch(ctx, g2, patch); err != nil {
		t.Fatal(err)
	}
	b := wantBucket(t, key, usage{4, 4, 0, 0})
	if b.Status.ContributingGrantRefs[1].ObservedGeneration != 2 {
		t.Fatalf("shrunk grant contributes at generation %d, want 2", b.Status.ContributingGrantRefs[1].ObservedGeneration)
	}

	if err := k8s.Delete(ctx, g1); err != nil {
		t.Fatal(err)
	}
	b = wantBucket(t, key, usage{1, 4, 0, 0})
	msg := waitCondition(t, b, quotav1alpha1.ConditionOverLimit, metav1.ConditionTrue, quotav1alpha1.ReasonLimitLowered)
	if msg != "allocated 4 exceeds the limit 1: existing claims are kept, new ones are refused until usage falls below the limit" {
		t.Fatalf("OverLimit message %q", msg)
	}
	wantEvent(t, b, "Warning", quotav1alpha1.ReasonLimitLowered, "SetLimit",
		"limit lowered to 1, below the 4 allocated: nothing more is admitted until usage falls below it")
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil || grantedCondition(claim).Status != metav1.ConditionTrue {
		t.Fatalf("claim after the limit fell: %v %+v", err, grantedCondition(claim))
	}
	requireAgreement(t, acme)

	// A grant that lifts the limit back says so too.
	newGrant(t, "t2-c", acme, builders.Allowance(rt, 3))
	b = wantBucket(t, key, usage{4, 4, 0, 0})
	wantEvent(t, b, "Normal", quotav1alpha1.ReasonWithinLimit, "SetLimit", "limit raised to 4: allocated 4 is within it again")
}

// Buckets are pre-created for amounts whose selector pins one dimension
// set; others wait for the first claim that lands in them.
func TestBucketPreCreationFollowsSelectors(t *testing.T) {
	needEnv(t)
	const rt = "t3.example.com/cpu"
	acme := orgConsumer("acme-t3")
	newRegistration(t, "t3-cpu", rt, organizationType, "region")
	newNamespace(t, "t3-tenant", tenantOf("acme-t3"))
	newGrant(t, "t3-dfw", acme, builders.SelectedAllowance(rt, &metav1.LabelSelector{MatchLabels: map[string]string{"region": "dfw"}}, 1000))
	newGrant(t, "t3-elsewhere", acme, builders.SelectedAllowance(rt, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "region", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"dfw"}}}}, 300))
	wantBucket(t, bucketKey(acme, rt, map[string]string{"region": "dfw"}), usage{1000, 0, 0, 1000})
	if _, err := getBucket(bucketKey(acme, rt, map[string]string{"region": "lhr"})); err == nil {
		t.Fatal("a bucket for a NotIn selector was pre-created")
	}
	claim := waitDecided(t, newClaim(t, "t3-tenant", "lhr", acme, builders.Request(rt, 100, map[string]string{"region": "lhr"})))
	if grantedCondition(claim).Message != "granted 100 of t3.example.com/cpu: available 200 of 300 (allocated 0, reserved 100)" {
		t.Fatalf("Granted condition %+v", grantedCondition(claim))
	}
	wantBucket(t, bucketKey(acme, rt, map[string]string{"region": "lhr"}), usage{300, 0, 100, 200})
	wantBucket(t, bucketKey(acme, rt, map[string]string{"region": "dfw"}), usage{1000, 0, 0, 1000})
}
