// Package e2e tests quotakeeper as users run it: a real kube-apiserver, three
// Gatekeeper processes behind a loopback load balancer, and the quotakeeper
// manager, all as local processes (localcluster), in either admission mode
// (QUOTAKEEPER_ADMISSION): Gatekeeper built with the plugin (the builtins),
// or a stock Gatekeeper running the templates' External Data twins, which
// ask the manager's provider. The same tests, decisions and messages hold in
// both; the few that test what only the plugin does skip in the stock mode
// (skipInStockMode says why; docs/operations.md, "What the stock mode gives
// up").
package e2e_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testcluster"
)

// reservationTTL is the shortest the plugin accepts (ledger.MinReservationTTL,
// above the longest webhook timeout), so that the expiry of a reservation
// whose object never appeared is observable within a test.
const reservationTTL = ledger.MinReservationTTL

// AdmissionEnv selects the admission mode the suite runs in: "builtins"
// (or unset) or "externalData", the chart's admission values. make test
// runs the suite once in each.
const AdmissionEnv = "QUOTAKEEPER_ADMISSION"

var cluster *localcluster.Cluster

// stockMode is true when the suite runs on a stock Gatekeeper with the
// External Data twins.
var stockMode bool

func TestMain(m *testing.M) {
	switch mode := os.Getenv(AdmissionEnv); mode {
	case "", "builtins":
	case "externalData":
		stockMode = true
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: want builtins or externalData\n", AdmissionEnv, mode)
		os.Exit(2)
	}
	suite := "e2e"
	if stockMode {
		suite = "e2e-stock"
	}
	os.Exit(testcluster.Main(m, suite, localcluster.Options{
		GatekeeperReplicas: 3,
		ReservationTTL:     reservationTTL,
		ManagerArgs:        []string{"--bypass-groups=system:masters," + bypassGroup},
		ExternalData:       stockMode,
	}, &cluster))
}

// skipInStockMode skips a test of what only Gatekeeper built with the
// plugin does, saying why it cannot hold on a stock Gatekeeper.
func skipInStockMode(t *testing.T, why string) {
	t.Helper()
	if stockMode {
		t.Skip("stock Gatekeeper (External Data): " + why)
	}
}
