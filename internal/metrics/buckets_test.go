package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
)

// Each bucket is reported with its consumer, resource type, namespace and
// name, and its numbers as its status has them; expired reservations are
// those past expiresAt at scrape time.
func TestBucketCollectorReportsEveryBucketAtScrapeTime(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	scheme := runtime.NewScheme()
	if err := quotav1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	reservation := func(id string, expires time.Time) quotav1alpha1.Reservation {
		return quotav1alpha1.Reservation{ID: id, Amount: 1, ExpiresAt: metav1.NewMicroTime(expires),
			Object: quotav1alpha1.ObjectRef{Kind: "Pod", Namespace: "team-a", Name: id, UID: id}}
	}
	buckets := []*quotav1alpha1.AllowanceBucket{{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a-pods", Namespace: "team-a"},
		Spec:       quotav1alpha1.AllowanceBucketSpec{ConsumerRef: quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-a"}, ResourceType: "core/pods"},
		Status: quotav1alpha1.AllowanceBucketStatus{Limit: 10, Allocated: 6, Reserved: 2, Available: 2, Reservations: []quotav1alpha1.Reservation{
			reservation("old", now.Add(-time.Second)), reservation("new", now.Add(time.Minute)),
		}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "acme-cpu", Namespace: "quotakeeper-system"},
		Spec: quotav1alpha1.AllowanceBucketSpec{ConsumerRef: quotav1alpha1.ConsumerRef{
			APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}, ResourceType: "compute/cpu"},
		Status: quotav1alpha1.AllowanceBucketStatus{Limit: 4, Allocated: 5},
	}}
	c := fake.NewClientBuilder().WithScheme(scheme)
	for _, b := range buckets {
		c = c.WithObjects(b)
	}
	collector := metrics.NewBucketCollector(c.Build(), func() time.Time { return now })

	const want = `
# HELP quotakeeper_bucket_available What the bucket can still grant: limit - used - reserved, never below zero.
# TYPE quotakeeper_bucket_available gauge
quotakeeper_bucket_available{bucket="acme-cpu",consumer="acme",consumer_kind="Organization",namespace="quotakeeper-system",resource_type="compute/cpu"} 0
quotakeeper_bucket_available{bucket="team-a-pods",consumer="team-a",consumer_kind="Namespace",namespace="team-a",resource_type="core/pods"} 2
# HELP quotakeeper_bucket_expired_reservations Reservations the bucket still holds past their expiresAt; the observer removes each once it knows its object is absent, so a lasting non-zero value means a stuck observer.
# TYPE quotakeeper_bucket_expired_reservations gauge
quotakeeper_bucket_expired_reservations{bucket="acme-cpu",consumer="acme",consumer_kind="Organization",namespace="quotakeeper-system",resource_type="compute/cpu"} 0
quotakeeper_bucket_expired_reservations{bucket="team-a-pods",consumer="team-a",consumer_kind="Namespace",namespace="team-a",resource_type="core/pods"} 1
# HELP quotakeeper_bucket_limit The bucket's limit: the sum of its consumer's active grants for the resource type whose dimension selector matches.
# TYPE quotakeeper_bucket_limit gauge
quotakeeper_bucket_limit{bucket="acme-cpu",consumer="acme",consumer_kind="Organization",namespace="quotakeeper-system",resource_type="compute/cpu"} 4
quotakeeper_bucket_limit{bucket="team-a-pods",consumer="team-a",consumer_kind="Namespace",namespace="team-a",resource_type="core/pods"} 10
# HELP quotakeeper_bucket_reserved The amount the bucket holds in reservations for admitted objects not yet observed.
# TYPE quotakeeper_bucket_reserved gauge
quotakeeper_bucket_reserved{bucket="acme-cpu",consumer="acme",consumer_kind="Organization",namespace="quotakeeper-system",resource_type="compute/cpu"} 0
quotakeeper_bucket_reserved{bucket="team-a-pods",consumer="team-a",consumer_kind="Namespace",namespace="team-a",resource_type="core/pods"} 2
# HELP quotakeeper_bucket_used The bucket's observed usage (status.allocated): what the live objects and Granted claims it counts hold.
# TYPE quotakeeper_bucket_used gauge
quotakeeper_bucket_used{bucket="acme-cpu",consumer="acme",consumer_kind="Organization",namespace="quotakeeper-system",resource_type="compute/cpu"} 5
quotakeeper_bucket_used{bucket="team-a-pods",consumer="team-a",consumer_kind="Namespace",namespace="team-a",resource_type="core/pods"} 6
`
	if err := testutil.CollectAndCompare(collector, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
