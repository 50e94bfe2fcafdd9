package controllers_test

import (
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// Done when: restarting the manager mid-way loses nothing. While it is
// down, claims are deleted, objects are admitted (reserved for by the
// admission side, which keeps running) or refused after reserving, a claim
// is left undecided, and a bucket's status is edited by hand; the manager
// stays down longer than the reservation TTL. When it comes back, every
// bucket agrees with the claims again: the deleted claim's amount is
// returned, the undecided claim decided once, the admitted object's
// reservation realized (late, but its object exists, so it is not
// expired), the refused one's returned, and the hand edit undone.
func TestRestartLosesNothing(t *testing.T) {
	needEnv(t)
	const widgets = "t8.example.com/widgets"
	ns := "t8-restart"
	c := newReservingNamespace(t, ns, 10)
	newRegistration(t, "t8-widgets", widgets, quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"})
	newGrant(t, "t8-widgets", c, builders.Allowance(widgets, 10))
	kept := waitDecided(t, newClaim(t, ns, "kept", c, builders.Request(widgets, 3, nil)))
	released := waitDecided(t, newClaim(t, ns, "released", c, builders.Request(widgets, 2, nil)))
	widgetKey, cmKey := bucketKey(c, widgets, nil), bucketKey(c, rtConfigMaps, nil)
	wantBucket(t, widgetKey, usage{10, 5, 0, 5})

	// Mid-way: a claim the manager may or may not have decided when it stops.
	midway := newClaim(t, ns, "midway", c, builders.Request(widgets, 1, nil))
	admitted := configMap(ns, "admitted", nil)

	restartManager(t, func() {
		if err := k8s.Delete(ctx, released); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Create(ctx, admitted); err != nil {
			t.Fatalf("admission while the manager is down: %v", err)
		}
		if err := k8s.Create(ctx, configMap(ns, "refused", map[string]string{denyAfterReserve: "yes"})); err == nil {
			t.Fatal("refused ConfigMap was created")
		}
		b, err := getBucket(cmKey)
		if err != nil || usageOf(b) != (usage{10, 0, 2, 8}) {
			t.Fatalf("configmap bucket while down: %v %v, want two reservations", err, b.Status)
		}
		// A hand edit: the kept claim's allocation removed, totals typed in.
		b, err = getBucket(widgetKey)
		if err != nil {
			t.Fatal(err)
		}
		var allocs []quotav1alpha1.Allocation
		for _, a := range b.Status.Allocations {
			if a.ID != string(kept.UID) {
				allocs = append(allocs, a)
			}
		}
		b.Status.Allocations, b.Status.Allocated, b.Status.Available = allocs, 99, 0
		if err := k8s.Status().Update(ctx, b); err != nil {
			t.Fatal(err)
		}
		time.Sleep(reservationTTL + 500*time.Millisecond) // the manager is down past the TTL: nothing to poll for
	})

	wantBucket(t, widgetKey, usage{10, 4, 0, 6}) // kept 3 + midway 1
	wantBucket(t, cmKey, usage{10, 1, 0, 9})     // admitted realized, refused returned
	midway = waitDecided(t, midway)
	if grantedCondition(midway).Status != metav1.ConditionTrue {
		t.Fatalf("midway claim: %+v", grantedCondition(midway))
	}
	testenv.Eventually(t, settle, "released claim gone", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(released), released); !apierrors.IsNotFound(err) {
			return fmt.Errorf("released claim still there (%w)", err)
		}
		claims, err := realizationClaims(ns, string(admitted.UID))
		if err != nil || len(claims) != 1 {
			return fmt.Errorf("claims of the admitted ConfigMap: %d, %w", len(claims), err)
		}
		if cond := grantedCondition(&claims[0]); cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("admitted ConfigMap's claim: %+v", cond)
		}
		return nil
	})
	requireAgreement(t, c)
}
