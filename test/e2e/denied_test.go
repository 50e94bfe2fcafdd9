package e2e_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// Issue 22's review: a request one quota constraint granted and another
// denied in the same Gatekeeper review held the first constraint's quota
// for the reservation TTL (reserved 1 left on the namespace's ConfigMap
// bucket after the denial, so the next create was refused for 35 s). The
// review's reservations are now given back before the denial goes out.
func TestADeniedReviewGivesItsReservationsBackAtOnce(t *testing.T) {
	skipInStockMode(t, "giving a denied review's reservations back is the plugin's wrapper of Gatekeeper's validation handler; "+
		"on a stock Gatekeeper they hold until they expire (reservationTTL), a false denial near the limit, never an excess")
	t.Parallel()
	const ns, cms, units = "e2e-denied-review", "e2e.quota/denied-review-configmaps", "e2e.quota/denied-review-units"
	// Two quota constraints on every ConfigMap of ns: a QuotaEntity counting
	// them (2), and a QuotaAllocation counting their units (2).
	unitsConsumer := unitsQuota(t, ns, units, 2)
	registration(t, cms, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	grant(t, "configmaps", consumer, cms, 2)
	quotaEntity(t, "e2e-denied-review", []string{ns}, map[string]any{"resourceType": cms})

	create(t, unitsConfigMap(ns, "a", 1))
	waitBucket(t, consumer, cms, 1, 0)
	waitBucket(t, unitsConsumer, units, 1, 0)

	// b fits the count (1 of 2 left) but not the units (3 of 1 left): the
	// QuotaEntity reserves, the QuotaAllocation denies.
	err := cluster.Client.Create(context.Background(), unitsConfigMap(ns, "b", 3))
	want := denial(ns, "quota exceeded for Namespace "+ns+": requested 3 of "+units+", available 1 of 2 (allocated 1, reserved 0)"+seeEffective(ns, unitsConsumer, units))
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("create b with 3 units: %v\nwant %s", err, want)
	}
	// Read right after the denial, seconds before the TTL (35 s): the
	// QuotaEntity's reservation for b is gone, in both buckets.
	if st := bucket(t, consumer, cms); st.Allocated != 1 || st.Reserved != 0 || len(st.Reservations) != 0 || st.Available != 1 {
		t.Fatalf("the count's bucket right after the denial: allocated %d reserved %d available %d reservations %+v, want 1, 0, 1 and none",
			st.Allocated, st.Reserved, st.Available, st.Reservations)
	}
	if st := bucket(t, unitsConsumer, units); st.Allocated != 1 || st.Reserved != 0 || len(st.Reservations) != 0 {
		t.Fatalf("the units' bucket right after the denial: allocated %d reserved %d reservations %+v, want 1, 0 and none",
			st.Allocated, st.Reserved, st.Reservations)
	}

	// So the quota is there for the next create at once: c fits both.
	if err := cluster.Client.Create(context.Background(), unitsConfigMap(ns, "c", 1)); err != nil {
		t.Fatalf("create c with 1 unit right after b's denial: %v", err)
	}
	waitBucket(t, consumer, cms, 2, 0)
	waitBucket(t, unitsConsumer, units, 2, 0)
	if got := liveUnits(t, ns); got != 2 {
		t.Fatalf("the live ConfigMaps ask for %d units, want 2", got)
	}
	err = cluster.Client.Create(context.Background(), unitsConfigMap(ns, "d", 0))
	wantFull := "quota exceeded for Namespace " + ns + ": requested 1 of " + cms + ", available 0 of 2 (allocated 2, reserved 0)"
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), wantFull) {
		t.Fatalf("create d past the count: %v\nwant a denial saying %q", err, wantFull)
	}
}
