package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quotakeeper/quotakeeper/internal/metrics"
)

// The manager's registry serves the serving certificate's expiry as a Unix
// timestamp once a certificate is recorded, the last one recorded.
func TestRegisterManagerServesTheServingCertificatesExpiry(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterManager(reg, fakeReader(t)); err != nil {
		t.Fatal(err)
	}
	const name = "quotakeeper_serving_certificate_expiration_timestamp_seconds"
	const help = `
# HELP quotakeeper_serving_certificate_expiration_timestamp_seconds When the certificate the manager's webhook server and External Data provider present expires (its NotAfter), in seconds since the Unix epoch; absent until the manager has loaded one.
# TYPE quotakeeper_serving_certificate_expiration_timestamp_seconds gauge
`
	metrics.ServingCertificate(time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC))
	metrics.ServingCertificate(time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)) // rotated
	if err := testutil.GatherAndCompare(reg, strings.NewReader(help+name+" 1.8038592e+09\n"), name); err != nil {
		t.Fatal(err)
	}
}
