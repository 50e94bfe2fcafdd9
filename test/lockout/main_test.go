// Package lockout shows that the values we ship cannot lock a cluster:
// with quotakeeper's manager and every Gatekeeper replica killed, the
// control plane's leases renew, namespaces are created and the manager
// restarts, while quota itself fails closed. It runs a cluster of its own,
// installed with the shipped Gatekeeper values alone (no opt-in rules) and
// no namespace labelled beforehand, because it kills every webhook backend.
package lockout_test

import (
	"os"
	"testing"

	"github.com/quotakeeper/quotakeeper/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testcluster"
)

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, "lockout", localcluster.Options{GatekeeperReplicas: 2, ShippedRulesOnly: true}, &cluster))
}
