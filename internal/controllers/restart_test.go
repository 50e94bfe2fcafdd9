package controllers_test

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// Done when: restarting the manager mid-way loses nothing. While it is
// down, a granted claim (one already counted by the observer, one still a
// reservation) is deleted and a claim is left undecided. When it comes back,
// every bucket agrees with the claims again: the deleted claims' finalizers
// release what they still reserved and let them go, and the undecided claim
// is decided once.
func TestRestartLosesNothing(t *testing.T) {
	needEnv(t)
	const widgets = "t8.example.com/widgets"
	ns := "t8-restart"
	newNamespace(t, ns, nil)
	c := nsConsumer(ns)
	newRegistration(t, "t8-widgets", widgets, quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"})
	newGrant(t, "t8-widgets", c, builders.Allowance(widgets, 10))
	kept := waitDecided(t, newClaim(t, ns, "kept", c, builders.Request(widgets, 3, nil)))
	counted := waitDecided(t, newClaim(t, ns, "counted", c, builders.Request(widgets, 2, nil)))
	observeClaims(t, c)
	reserved := waitDecided(t, newClaim(t, ns, "reserved", c, builders.Request(widgets, 1, nil)))
	key := bucketKey(c, widgets, nil)
	wantBucket(t, key, usage{10, 5, 1, 4})

	// Mid-way: a claim the manager may or may not have decided when it stops.
	midway := newClaim(t, ns, "midway", c, builders.Request(widgets, 1, nil))

	restartManager(t, func() {
		for _, claim := range []*quotav1alpha1.ResourceClaim{counted, reserved} {
			if err := k8s.Delete(ctx, claim); err != nil {
				t.Fatal(err)
			}
		}
	})

	midway = waitDecided(t, midway)
	if grantedCondition(midway).Status != metav1.ConditionTrue {
		t.Fatalf("midway claim: %+v", grantedCondition(midway))
	}
	testenv.Eventually(t, settle, "deleted claims gone", func() error {
		for _, claim := range []*quotav1alpha1.ResourceClaim{counted, reserved} {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim); !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleted claim %s still there (%w)", claim.Name, err)
			}
		}
		return nil
	})
	// The reserved claim's reservation is released; the counted one leaves
	// allocated when the observer next looks, and only then.
	wantBucket(t, key, usage{10, 5, 1, 4}) // kept 3 + counted 2 observed, midway 1 reserved
	observeClaims(t, c)
	wantBucket(t, key, usage{10, 4, 0, 6}) // kept 3 + midway 1
	if kept = waitDecided(t, kept); grantedCondition(kept).Status != metav1.ConditionTrue {
		t.Fatalf("kept claim: %+v", grantedCondition(kept))
	}
	requireAgreement(t, c)
}
