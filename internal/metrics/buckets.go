package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// bucketLabels name a bucket: its consumer, resource type, the namespace the
// AllowanceBucket lives in (the consumer namespace for a Namespace
// consumer, the system namespace for a cluster-wide one such as an
// Organization) and its name, which tells apart buckets of the same
// consumer and resource type that differ by dimensions.
var bucketLabels = []string{"consumer_kind", "consumer", "resource_type", "namespace", "bucket"}

func bucketDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, "bucket", name), help, bucketLabels, nil)
}

var (
	bucketLimit     = bucketDesc("limit", "The bucket's limit: the sum of its consumer's active grants for the resource type whose dimension selector matches.")
	bucketUsed      = bucketDesc("used", "The bucket's observed usage (status.allocated): what the live objects and Granted claims it counts hold.")
	bucketReserved  = bucketDesc("reserved", "The amount the bucket holds in reservations for admitted objects not yet observed.")
	bucketAvailable = bucketDesc("available", "What the bucket can still grant: limit - used - reserved, never below zero.")
	bucketExpired   = bucketDesc("expired_reservations", "Reservations the bucket still holds past their expiresAt; the observer removes each once it knows its object is absent, so a lasting non-zero value means a stuck observer.")
)

// scrapeTimeout bounds the cache read of one scrape: a cache that has not
// synced yet must not hang the scrape.
const scrapeTimeout = 5 * time.Second

// BucketCollector reports every AllowanceBucket's numbers, read from a
// cache at scrape time, so there is no state to keep in step with the
// buckets: a deleted bucket's series simply stop.
type BucketCollector struct {
	buckets client.Reader
	now     func() time.Time
}

// NewBucketCollector returns a collector over the AllowanceBuckets buckets
// lists (the manager's cache); now judges which reservations have expired.
func NewBucketCollector(buckets client.Reader, now func() time.Time) *BucketCollector {
	return &BucketCollector{buckets: buckets, now: now}
}

// Describe implements prometheus.Collector.
func (c *BucketCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{bucketLimit, bucketUsed, bucketReserved, bucketAvailable, bucketExpired} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A failed read reports no bucket
// and logs why, rather than failing the whole scrape (controller-runtime's
// own metrics share the endpoint).
func (c *BucketCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	var list quotav1alpha1.AllowanceBucketList
	if err := c.buckets.List(ctx, &list); err != nil {
		logf.Log.WithName("metrics").Error(err, "listing AllowanceBuckets for quotakeeper_bucket_* metrics")
		return
	}
	now := c.now()
	for i := range list.Items {
		b := &list.Items[i]
		labels := []string{b.Spec.ConsumerRef.Kind, b.Spec.ConsumerRef.Name, b.Spec.ResourceType, b.Namespace, b.Name}
		expired := 0
		for _, r := range b.Status.Reservations {
			if !r.ExpiresAt.IsZero() && r.ExpiresAt.Time.Before(now) {
				expired++
			}
		}
		for _, m := range []struct {
			desc  *prometheus.Desc
			value float64
		}{
			{bucketLimit, float64(b.Status.Limit)},
			{bucketUsed, float64(b.Status.Allocated)},
			{bucketReserved, float64(b.Status.Reserved)},
			{bucketAvailable, float64(b.Status.Available)},
			{bucketExpired, float64(expired)},
		} {
			ch <- prometheus.MustNewConstMetric(m.desc, prometheus.GaugeValue, m.value, labels...)
		}
	}
}
