// Package testcluster runs a test package's suite against a local cluster
// of its own (localcluster) with the repository's Gatekeeper and manager
// binaries, the chart's SyncSet and every quota template installed: what the
// end-to-end and fault suites share.
package testcluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// Main is a TestMain body: it skips the suite in -short mode, starts the
// cluster opts describe (Dir, Gatekeeper and Manager are filled in: the
// stock Gatekeeper for opts.ExternalData) into
// *cluster, runs the tests and stops the cluster. It returns the exit code.
// The process logs stay in a directory named after suite when a test fails.
func Main(m *testing.M, suite string, opts localcluster.Options, cluster **localcluster.Cluster) int {
	flag.Parse()
	if testing.Short() {
		fmt.Printf("skipping %s suite in -short mode\n", suite)
		return 0
	}
	root := testenv.RepoRoot()
	bins := map[string]string{"quotakeeper-manager": "make manager"}
	opts.Gatekeeper = filepath.Join(root, "bin", "gatekeeper")
	if opts.ExternalData {
		stock, err := localcluster.StockGatekeeperBinary()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opts.Gatekeeper = stock
	} else {
		bins["gatekeeper"] = "make gatekeeper"
	}
	for bin, how := range bins {
		if _, err := os.Stat(filepath.Join(root, "bin", bin)); err != nil {
			fmt.Fprintf(os.Stderr, "bin/%s missing: run '%s' (make test builds it)\n", bin, how)
			return 1
		}
	}
	dir, err := os.MkdirTemp("", "quotakeeper-"+suite+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts.Dir = dir
	opts.Manager = filepath.Join(root, "bin", "quotakeeper-manager")
	ctx := context.Background()
	c, err := localcluster.Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start cluster:", err, "(logs in", dir+")")
		return 1
	}
	defer c.Stop()
	*cluster = c
	// The SyncSet and the templates as the chart renders them (they need
	// Gatekeeper's CRDs, which the bed installs with the control plane).
	if err := c.Apply(ctx, 2*time.Minute, c.Chart.Kinds("SyncSet", "ConstraintTemplate")...); err != nil {
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
