// Package e2e tests quotakeeper as users run it: a real kube-apiserver, three
// Gatekeeper processes built with the plugin behind a loopback load balancer,
// and the quotakeeper manager, all as local processes (localcluster).
package e2e_test

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

// reservationTTL is short so that the expiry of a reservation whose object
// never appeared is observable within a test.
const reservationTTL = 8 * time.Second

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping end-to-end suite in -short mode")
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
	dir, err := os.MkdirTemp("", "quotakeeper-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	cluster, err = localcluster.Start(ctx, localcluster.Options{
		Dir:                dir,
		Gatekeeper:         filepath.Join(root, "bin", "gatekeeper"),
		GatekeeperReplicas: 3,
		Manager:            filepath.Join(root, "bin", "quotakeeper-manager"),
		ReservationTTL:     reservationTTL,
		ManagerArgs:        []string{"--bypass-groups=system:masters," + bypassGroup},
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
