// Package e2estock tests quota's second admission mode as users run it: a
// stock Gatekeeper v3.23.1 (Gatekeeper's own build, nothing of ours linked
// in) running the templates' External Data twins, which ask the
// quotakeeper manager's provider, against a real kube-apiserver, all as
// local processes (localcluster with Options.ExternalData). Separate from
// test/e2e because it runs a cluster of its own, with other binaries.
package e2estock_test

import (
	"os"
	"testing"

	"github.com/quotakeeper/quotakeeper/ledger"
	"github.com/quotakeeper/quotakeeper/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testcluster"
)

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, "e2estock", localcluster.Options{
		GatekeeperReplicas: 2,
		ReservationTTL:     ledger.MinReservationTTL,
		ExternalData:       true,
	}, &cluster))
}
