// Package e2e tests quotakeeper as users run it: a real kube-apiserver, three
// Gatekeeper processes built with the plugin behind a loopback load balancer,
// and the quotakeeper manager, all as local processes (localcluster).
package e2e_test

import (
	"os"
	"testing"

	"github.com/quotakeeper/quotakeeper/ledger"
	"github.com/quotakeeper/quotakeeper/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testcluster"
)

// reservationTTL is the shortest the plugin accepts (ledger.MinReservationTTL,
// above the longest webhook timeout), so that the expiry of a reservation
// whose object never appeared is observable within a test.
const reservationTTL = ledger.MinReservationTTL

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, "e2e", localcluster.Options{
		GatekeeperReplicas: 3,
		ReservationTTL:     reservationTTL,
		ManagerArgs:        []string{"--bypass-groups=system:masters," + bypassGroup},
	}, &cluster))
}
