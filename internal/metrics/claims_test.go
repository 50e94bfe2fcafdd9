package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

const claimsHelp = `
# HELP quotakeeper_claims_pending ResourceClaims waiting for a decision: no Granted condition True or False for their generation (views and claims being deleted aside).
# TYPE quotakeeper_claims_pending gauge
# HELP quotakeeper_claims_pending_oldest_age_seconds Age of the oldest ResourceClaim waiting for a decision, from its creation; 0 when none waits. The claim controller decides a claim in moments, so a growing value means it is not deciding (no leader, the grant mirror not synced, errors it retries).
# TYPE quotakeeper_claims_pending_oldest_age_seconds gauge
`

// A claim waits while it has no Granted condition True or False for its
// generation: none yet, Unknown (the controller waits or retries), or one
// for an older generation. Decided claims, views (never decided) and
// claims being deleted do not wait; the oldest waiting one's age is read at
// scrape time.
func TestClaimCollectorReportsTheClaimsWaitingForADecision(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	granted := func(status metav1.ConditionStatus, generation int64) quotav1alpha1.ResourceClaimStatus {
		return quotav1alpha1.ResourceClaimStatus{Conditions: []metav1.Condition{{
			Type: quotav1alpha1.ConditionGranted, Status: status, ObservedGeneration: generation,
			Reason: "R", LastTransitionTime: metav1.NewTime(now),
		}}}
	}
	claim := func(name string, age time.Duration) *builders.ClaimWrapper {
		w := builders.Claim(name, "team-a").Generation(1).Request("compute/cpu", 1, nil)
		w.CreationTimestamp = metav1.NewTime(now.Add(-age))
		return w
	}
	deleting := claim("deleting", time.Hour).Obj()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	deleting.Finalizers = []string{quotav1alpha1.ClaimFinalizer}
	claims := []*quotav1alpha1.ResourceClaim{
		claim("new", time.Second).Obj(),
		claim("retrying", 90*time.Second).Status(granted(metav1.ConditionUnknown, 1)).Obj(),
		claim("older-generation", 30*time.Second).Status(granted(metav1.ConditionTrue, 0)).Obj(),
		claim("granted", time.Hour).Status(granted(metav1.ConditionTrue, 1)).Obj(),
		claim("denied", time.Hour).Status(granted(metav1.ConditionFalse, 1)).Obj(),
		claim("view", time.Hour).View().Obj(),
		deleting,
	}
	collector := metrics.NewClaimCollector(fakeReader(t, claims...), func() time.Time { return now })
	if err := testutil.CollectAndCompare(collector, strings.NewReader(claimsHelp+`quotakeeper_claims_pending 3
quotakeeper_claims_pending_oldest_age_seconds 90
`)); err != nil {
		t.Fatal(err)
	}

	// None waiting: both are 0, so a rule sees the series and no claim.
	none := metrics.NewClaimCollector(fakeReader(t), func() time.Time { return now })
	if err := testutil.CollectAndCompare(none, strings.NewReader(claimsHelp+`quotakeeper_claims_pending 0
quotakeeper_claims_pending_oldest_age_seconds 0
`)); err != nil {
		t.Fatal(err)
	}
}

// fakeReader reads claims, as the manager's cache would.
func fakeReader(t *testing.T, claims ...*quotav1alpha1.ResourceClaim) client.Reader {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := quotav1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, c := range claims {
		b = b.WithObjects(c)
	}
	return b.Build()
}
