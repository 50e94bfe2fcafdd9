// Package stock_test runs test/lockout's scenario with a stock Gatekeeper
// and quota through External Data (config/gatekeeper/values-external-data.yaml).
package stock_test

import (
	"os"
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/lockout"
	"github.com/quotakeeper/quotakeeper/test/testcluster"
)

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, "lockout-stock", localcluster.Options{GatekeeperReplicas: 2, ShippedRulesOnly: true, ExternalData: true}, &cluster))
}

// Done when (issue 24): the External Data mode's values cannot lock the
// cluster.
func TestQuotaDownLocksNothingButQuota(t *testing.T) {
	lockout.QuotaDownLocksNothingButQuota(t, cluster)
}
