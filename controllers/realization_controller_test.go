package controllers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/ledger"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// newReservingNamespace is a namespace whose ConfigMaps the admission side
// reserves for, with a grant of limit ConfigMaps.
func newReservingNamespace(t *testing.T, name string, limit int64) ledger.Consumer {
	t.Helper()
	newNamespace(t, name, map[string]string{reserveLabel: "true"})
	c := nsConsumer(name)
	newGrant(t, name+"-configmaps", c, builders.Allowance(rtConfigMaps, limit))
	wantBucket(t, bucketKey(c, rtConfigMaps, nil), usage{limit, 0, 0, limit})
	// The admission side decides with its own mirror: wait until it sees
	// the grant too, as Gatekeeper would have by the time a tenant acts.
	testenv.Eventually(t, settle, "admission mirror sees the grant", func() error {
		if len(gk.mirror.GrantsFor(c, rtConfigMaps)) == 0 {
			return fmt.Errorf("admission side has no grant for %s yet", name)
		}
		return nil
	})
	return c
}

func configMap(ns, name string, annotations map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations}}
}

// realizationClaims lists the claims made for an object (owned by it).
func realizationClaims(ns string, uid string) ([]quotav1alpha1.ResourceClaim, error) {
	var list quotav1alpha1.ResourceClaimList
	if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []quotav1alpha1.ResourceClaim
	for _, c := range list.Items {
		for _, o := range c.OwnerReferences {
			if string(o.UID) == uid {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// Done when: a reservation whose object is created becomes a claim owned by
// the object, moving the amount from reserved to allocated; deleting the
// claim (what garbage collection does when the object goes) returns it.
func TestReservationBecomesAnOwnedClaim(t *testing.T) {
	needEnv(t)
	ns := "t6-realize"
	c := newReservingNamespace(t, ns, 3)
	key := bucketKey(c, rtConfigMaps, nil)

	cm := configMap(ns, "settings", nil)
	if err := k8s.Create(ctx, cm); err != nil {
		t.Fatalf("create ConfigMap: %v", err)
	}
	var claim quotav1alpha1.ResourceClaim
	testenv.Eventually(t, settle, "claim of the ConfigMap", func() error {
		claims, err := realizationClaims(ns, string(cm.UID))
		if err != nil || len(claims) != 1 {
			return fmt.Errorf("claims owned by the ConfigMap: %d, %w", len(claims), err)
		}
		claim = claims[0]
		return nil
	})
	owner := claim.OwnerReferences[0]
	if owner.APIVersion != "v1" || owner.Kind != "ConfigMap" || owner.Name != "settings" || owner.UID != cm.UID || len(claim.OwnerReferences) != 1 {
		t.Fatalf("owner reference %+v, want v1 ConfigMap settings %s", claim.OwnerReferences, cm.UID)
	}
	if claim.Annotations[quotav1alpha1.ReservationIDAnnotation] != string(cm.UID) || !strings.HasPrefix(claim.Name, "configmap-settings-") {
		t.Fatalf("claim %s annotations %v", claim.Name, claim.Annotations)
	}
	wantSpec := quotav1alpha1.ResourceClaimSpec{
		ConsumerRef: quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns},
		Requests:    []quotav1alpha1.ResourceRequest{{ResourceType: rtConfigMaps, Amount: 1}},
		ResourceRef: &quotav1alpha1.ObjectRef{Kind: "ConfigMap", Namespace: ns, Name: "settings", UID: string(cm.UID)},
	}
	if diff := cmp.Diff(wantSpec, claim.Spec); diff != "" {
		t.Fatalf("claim spec (-want +got):\n%s", diff)
	}
	decided := waitDecided(t, &claim)
	if c := grantedCondition(decided); c.Status != metav1.ConditionTrue || c.Reason != quotav1alpha1.ReasonQuotaAvailable ||
		c.Message != fmt.Sprintf("granted at admission: the reservation %s is now allocated", cm.UID) {
		t.Fatalf("Granted condition %+v", c)
	}
	b := wantBucket(t, key, usage{3, 1, 0, 2})
	if len(b.Status.Allocations) != 1 || b.Status.Allocations[0].ID != string(cm.UID) {
		t.Fatalf("allocations %+v, want the ConfigMap's uid", b.Status.Allocations)
	}
	requireAgreement(t, c)

	// No kube-controller-manager runs here, so nothing collects the claim
	// when the ConfigMap goes: delete the claim as the garbage collector
	// would, and its finalizer returns the amount.
	if err := k8s.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, decided); err != nil {
		t.Fatal(err)
	}
	wantBucket(t, key, usage{3, 0, 0, 3})
	testenv.Eventually(t, settle, "decided claim gone", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(decided), decided); !apierrors.IsNotFound(err) {
			return fmt.Errorf("claim still there (%w), finalizers %v", err, decided.Finalizers)
		}
		return nil
	})
}

// Done when: a reservation whose object never appears is gone after its
// TTL, and not before.
func TestReservationWithoutObjectExpires(t *testing.T) {
	needEnv(t)
	ns := "t7-expire"
	c := newReservingNamespace(t, ns, 3)
	key := bucketKey(c, rtConfigMaps, nil)

	start := time.Now()
	err := k8s.Create(ctx, configMap(ns, "never", map[string]string{denyAfterReserve: "yes"}))
	if err == nil || !strings.Contains(err.Error(), "denied by a later admission check") {
		t.Fatalf("create = %v, want the later check's denial", err)
	}
	b, err := getBucket(key)
	if err != nil {
		t.Fatal(err)
	}
	if got := usageOf(b); got != (usage{3, 0, 1, 2}) || len(b.Status.Reservations) != 1 {
		t.Fatalf("right after admission: %v with %+v, want one reservation", got, b.Status.Reservations)
	}
	res := b.Status.Reservations[0]
	if res.Object.Kind != "ConfigMap" || res.Object.Name != "never" || res.Object.UID == "" || res.ID != res.Object.UID {
		t.Fatalf("reservation %+v", res)
	}

	wantBucket(t, key, usage{3, 0, 0, 3})
	if elapsed := time.Since(start); elapsed < reservationTTL {
		t.Fatalf("reservation returned after %v, before its TTL of %v", elapsed, reservationTTL)
	}
	claims, err := realizationClaims(ns, res.Object.UID)
	if err != nil || len(claims) != 0 {
		t.Fatalf("claims for an object that never existed: %v %v", claims, err)
	}
}
