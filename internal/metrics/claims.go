package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

var (
	claimsPending = prometheus.NewDesc(prometheus.BuildFQName(namespace, "claims", "pending"),
		"ResourceClaims waiting for a decision: no Granted condition True or False for their generation (views and claims being deleted aside).", nil, nil)
	claimsPendingOldest = prometheus.NewDesc(prometheus.BuildFQName(namespace, "claims", "pending_oldest_age_seconds"),
		"Age of the oldest ResourceClaim waiting for a decision, from its creation; 0 when none waits. The claim controller decides a claim in moments, so a growing value means it is not deciding (no leader, the grant mirror not synced, errors it retries).", nil, nil)
)

// notViews selects the claims the claim controller decides: the
// observer's views (one per counted object, so most claims of a large
// cluster) are never decided, and the cache filters them out before copying.
var notViews = func() labels.Selector {
	r, err := labels.NewRequirement(quotav1alpha1.ViewLabel, selection.NotEquals, []string{"true"})
	if err != nil {
		panic(err) // a constant label key and value
	}
	return labels.NewSelector().Add(*r)
}()

// ClaimCollector reports the ResourceClaims that wait for a decision, read
// from a cache at scrape time, as BucketCollector reads the buckets.
type ClaimCollector struct {
	claims client.Reader
	now    func() time.Time
}

// NewClaimCollector returns a collector over the ResourceClaims claims
// lists (the manager's cache); now measures their age.
func NewClaimCollector(claims client.Reader, now func() time.Time) *ClaimCollector {
	return &ClaimCollector{claims: claims, now: now}
}

// Describe implements prometheus.Collector.
func (c *ClaimCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- claimsPending
	ch <- claimsPendingOldest
}

// Collect implements prometheus.Collector. A failed read reports nothing
// and logs why, as BucketCollector does.
func (c *ClaimCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	var list quotav1alpha1.ResourceClaimList
	// Read only: the cache's objects themselves, not copies.
	if err := c.claims.List(ctx, &list, client.MatchingLabelsSelector{Selector: notViews}, client.UnsafeDisableDeepCopy); err != nil {
		logf.Log.WithName("metrics").Error(err, "listing ResourceClaims for quotakeeper_claims_* metrics")
		return
	}
	pending, oldest := pendingClaims(list.Items, c.now())
	ch <- prometheus.MustNewConstMetric(claimsPending, prometheus.GaugeValue, float64(pending))
	ch <- prometheus.MustNewConstMetric(claimsPendingOldest, prometheus.GaugeValue, oldest.Seconds())
}

// pendingClaims counts the claims (views left out by the list's selector)
// that wait for a decision at now and returns the age of the oldest: a
// claim not being deleted, without a decision for its generation.
func pendingClaims(claims []quotav1alpha1.ResourceClaim, now time.Time) (int, time.Duration) {
	n, oldest := 0, time.Duration(0)
	for i := range claims {
		c := &claims[i]
		if c.DeletionTimestamp != nil || c.Decided() {
			continue
		}
		n++
		if age := now.Sub(c.CreationTimestamp.Time); age > oldest {
			oldest = age
		}
	}
	return n, oldest
}
