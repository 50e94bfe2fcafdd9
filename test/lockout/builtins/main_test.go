// Package builtins_test runs test/lockout's scenario with Gatekeeper built
// with the plugin (the builtins mode), and shows a builtin's failure in the
// words a tenant reads.
package builtins_test

import (
	"os"
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/lockout"
	"github.com/quotakeeper/quotakeeper/test/testcluster"
)

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, "lockout-builtins", localcluster.Options{GatekeeperReplicas: 2, ShippedRulesOnly: true}, &cluster))
}

// Done when (issue 24): the builtins mode's values cannot lock the cluster.
func TestQuotaDownLocksNothingButQuota(t *testing.T) {
	lockout.QuotaDownLocksNothingButQuota(t, cluster)
}
