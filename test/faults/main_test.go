// Package faults tests quotakeeper end to end while parts of the cluster
// fail under load: kube-apiserver killed and restarted, etcd stopped and
// started again, the manager down for longer than the reservation TTL, a
// Gatekeeper replica killed mid-batch. It runs a cluster of its own (one
// manager, two Gatekeeper replicas), so that restarting the control plane
// disturbs no other suite. docs/operations.md#faults says what each fault
// does and how to run these tests.
package faults_test

import (
	"os"
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testcluster"
)

// reservationTTL is the shortest the plugin accepts (ledger.MinReservationTTL:
// a safe TTL, above the longest webhook timeout), so that a reservation whose
// object never appeared expires within a scenario, and so that the manager's
// outage can outlast it.
const reservationTTL = ledger.MinReservationTTL

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, "faults", localcluster.Options{GatekeeperReplicas: 2, ReservationTTL: reservationTTL}, &cluster))
}
