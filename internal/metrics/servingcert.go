package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var servingCertificateExpiry = prometheus.NewDesc(prometheus.BuildFQName(namespace, "serving_certificate", "expiration_timestamp_seconds"),
	"When the certificate the manager's webhook server and External Data provider present expires (its NotAfter), in seconds since the Unix epoch; absent until the manager has loaded one.", nil, nil)

// servingCertificate is the NotAfter, in Unix seconds, that
// ServingCertificate recorded last; 0 until then.
var servingCertificate atomic.Int64

// ServingCertificate records the NotAfter of the certificate the manager's
// servers present from now on (package servingcert calls it for each
// certificate it loads).
func ServingCertificate(notAfter time.Time) { servingCertificate.Store(notAfter.Unix()) }

// servingCertificateCollector reports what ServingCertificate recorded, and
// nothing before it has: no certificate is not one that expired in 1970.
type servingCertificateCollector struct{}

// Describe implements prometheus.Collector.
func (servingCertificateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- servingCertificateExpiry
}

// Collect implements prometheus.Collector.
func (servingCertificateCollector) Collect(ch chan<- prometheus.Metric) {
	if notAfter := servingCertificate.Load(); notAfter != 0 {
		ch <- prometheus.MustNewConstMetric(servingCertificateExpiry, prometheus.GaugeValue, float64(notAfter))
	}
}
