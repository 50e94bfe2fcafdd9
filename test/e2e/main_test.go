// Package e2e tests quotakeeper as users run it: a real kube-apiserver, three
// Gatekeeper processes built with the plugin behind a loopback load balancer,
// and the quotakeeper manager, all as local processes (localcluster).
package e2e_test

import (
	"os"
	"testing"
	"time"

	"github.com/quotakeeper/quotakeeper/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testcluster"
)

// reservationTTL is short so that the expiry of a reservation whose object
// never appeared is observable within a test.
const reservationTTL = 8 * time.Second

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, "e2e", localcluster.Options{
		GatekeeperReplicas: 3,
		ReservationTTL:     reservationTTL,
		ManagerArgs:        []string{"--bypass-groups=system:masters," + bypassGroup},
	}, &cluster))
}
