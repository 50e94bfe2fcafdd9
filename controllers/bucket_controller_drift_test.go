package controllers_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

// Done when: drift introduced by editing a bucket's status by hand is
// repaired, from the truth: the granted claims, the reservations, and the
// limit the grants give.
func TestHandEditedBucketIsRepaired(t *testing.T) {
	needEnv(t)
	const rt = "t9.example.com/widgets"
	acme := orgConsumer("acme-t9")
	newRegistration(t, "t9-widgets", rt, organizationType)
	newNamespace(t, "t9-tenant", tenantOf("acme-t9"))
	newGrant(t, "t9", acme, builders.Allowance(rt, 10))
	a := waitDecided(t, newClaim(t, "t9-tenant", "a", acme, builders.Request(rt, 2, nil)))
	waitDecided(t, newClaim(t, "t9-tenant", "b", acme, builders.Request(rt, 3, nil)))
	key := bucketKey(acme, rt, nil)
	truth := usage{10, 5, 0, 5}
	wantBucket(t, key, truth)

	edits := []struct {
		name string
		edit func(*quotav1alpha1.AllowanceBucketStatus)
	}{
		{"totals typed in", func(s *quotav1alpha1.AllowanceBucketStatus) { s.Allocated, s.Available, s.ClaimCount = 99, 0, 9 }},
		{"an allocation removed", func(s *quotav1alpha1.AllowanceBucketStatus) {
			s.Allocations = s.Allocations[1:]
			s.Allocated, s.Available, s.ClaimCount = s.Allocated-s.Allocations[0].Amount, 7, 1
		}},
		{"an allocation forged", func(s *quotav1alpha1.AllowanceBucketStatus) {
			s.Allocations = append(s.Allocations, quotav1alpha1.Allocation{ID: "zz-forged", Amount: 4})
			s.Allocated, s.Available, s.ClaimCount = 9, 1, 3
		}},
		{"an amount changed", func(s *quotav1alpha1.AllowanceBucketStatus) {
			for i := range s.Allocations {
				if s.Allocations[i].ID == string(a.UID) {
					s.Allocations[i].Amount = 1
				}
			}
			s.Allocated, s.Available = 4, 6
		}},
		{"the limit raised", func(s *quotav1alpha1.AllowanceBucketStatus) { s.Limit, s.Available = 1000, 995 }},
		{"the condition flipped", func(s *quotav1alpha1.AllowanceBucketStatus) {
			over := meta.FindStatusCondition(s.Conditions, quotav1alpha1.ConditionOverLimit)
			over.Status, over.Reason, over.Message = metav1.ConditionTrue, "Edited", "edited"
		}},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			b, err := getBucket(key)
			if err != nil {
				t.Fatal(err)
			}
			e.edit(&b.Status)
			if err := k8s.Status().Update(ctx, b); err != nil {
				t.Fatal(err)
			}
			b = wantBucket(t, key, truth)
			waitCondition(t, b, quotav1alpha1.ConditionOverLimit, metav1.ConditionFalse, quotav1alpha1.ReasonWithinLimit)
			requireAgreement(t, acme)
		})
	}
}
