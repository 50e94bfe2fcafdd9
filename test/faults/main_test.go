// Package faults tests quotakeeper end to end while parts of the cluster
// fail under load: kube-apiserver killed and restarted, etcd stopped and
// started again, the manager down for longer than the reservation TTL, a
// Gatekeeper replica killed mid-batch. It runs a cluster of its own (one
// manager, two Gatekeeper replicas), so that restarting the control plane
// disturbs no other suite. docs/operations.md#faults says what each fault
// does and how to run these tests.
package faults_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quotakeeper/quotakeeper/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// reservationTTL is short so that a reservation whose object never appeared
// expires within a scenario, and so that the manager's outage can outlast it.
const reservationTTL = 8 * time.Second

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping fault suite in -short mode")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root := testenv.RepoRoot()
	bins := map[string]string{"gatekeeper": "make gatekeeper", "quotakeeper-manager": "make manager"}
	for bin, how := range bins {
		if _, err := os.Stat(filepath.Join(root, "bin", bin)); err != nil {
			fmt.Fprintf(os.Stderr, "bin/%s missing: run '%s' (make test builds it)\n", bin, how)
			return 1
		}
	}
	dir, err := os.MkdirTemp("", "quotakeeper-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	cluster, err = localcluster.Start(ctx, localcluster.Options{
		Dir:                dir,
		Gatekeeper:         filepath.Join(root, "bin", "gatekeeper"),
		GatekeeperReplicas: 2,
		Manager:            filepath.Join(root, "bin", "quotakeeper-manager"),
		ReservationTTL:     reservationTTL,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start cluster:", err, "(logs in", dir+")")
		return 1
	}
	defer cluster.Stop()
	files := []string{filepath.Join(root, "config", "gatekeeper", "syncset.yaml")}
	templates, _ := filepath.Glob(filepath.Join(root, "templates", "*", "template.yaml"))
	files = append(files, templates...)
	if err := cluster.ApplyFiles(ctx, 2*time.Minute, files...); err != nil {
		fmt.Fprintln(os.Stderr, "install:", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, "process logs are in", dir)
	} else {
		_ = os.RemoveAll(dir)
	}
	return code
}
