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

// LeasesEnv tunes capacity leases, which are on by default (where a
// bucket's headroom is 512 creates or more). Set to 1, each lease is a half
// of the headroom and taken down to a single create's worth
// (--quota-capacity-lease-share=2, --quota-capacity-lease-min-creates=1):
// the hardest case for exactness, with nearly every create of a lane
// admitted inside a lease (make e2e LEASES=1, make exactness LEASES=1).
// Set to 0, they are off: every create takes the synchronous path.
const LeasesEnv = "QUOTAKEEPER_CAPACITY_LEASES"

var cluster *localcluster.Cluster

// leasesOn is true when the suite runs with capacity leases (LeasesEnv).
var leasesOn bool

// stockMode is true when the suite runs on a stock Gatekeeper with the
// External Data twins.
var stockMode bool

// The tests share one cluster. Those that restart processes, change
// cluster-wide configuration, read global metrics or measure (or race a
// deadline) run sequentially first; the rest touch only objects named for
// them and call t.Parallel() (after any skip), so they run together after.
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
	var gatekeeperArgs []string
	managerArgs := []string{"--bypass-groups=system:masters," + bypassGroup}
	switch leases := os.Getenv(LeasesEnv); leases {
	case "":
		// The defaults: capacity leases on, tuned so that a bucket with
		// less than 512 creates' worth of headroom is never leased.
	case "0":
		suite += "-noleases"
		if stockMode {
			managerArgs = append(managerArgs, "--capacity-leases=false")
			break
		}
		gatekeeperArgs = []string{"--quota-capacity-leases=false"}
	case "1":
		// The plugin's, or in the stock mode the provider's.
		suite, leasesOn = suite+"-leases", true
		if stockMode {
			managerArgs = append(managerArgs, "--capacity-leases", "--capacity-lease-share=2", "--capacity-lease-min-creates=1")
			break
		}
		gatekeeperArgs = []string{"--quota-capacity-leases", "--quota-capacity-lease-share=2", "--quota-capacity-lease-min-creates=1"}
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: want 1, 0 or unset\n", LeasesEnv, leases)
		os.Exit(2)
	}
	os.Exit(testcluster.Main(m, suite, localcluster.Options{
		GatekeeperReplicas: 3,
		ReservationTTL:     reservationTTL,
		ManagerArgs:        managerArgs,
		ExternalData:       stockMode,
		GatekeeperArgs:     gatekeeperArgs,
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
