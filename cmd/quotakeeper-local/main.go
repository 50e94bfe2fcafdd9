// Command quotakeeper-local is `make run`: it brings up a local control plane
// (etcd and kube-apiserver from bin/testbin), Gatekeeper built with the
// quotakeeper plugin (or, with --stock, `make run GATEKEEPER=stock`, a stock
// Gatekeeper and the templates' External Data twins), and the quotakeeper
// manager, installs the templates
// under templates/ and the examples under config/samples, prints where the kubeconfig is, and keeps
// printing a live usage table until interrupted.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotakeeper/quotakeeper/internal/checkout"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/internal/usage"
	"github.com/quotakeeper/quotakeeper/internal/version"
)

func main() {
	root, err := checkout.Root()
	if err != nil {
		fmt.Fprintln(os.Stderr, "quotakeeper-local:", err)
		os.Exit(1)
	}
	dir := flag.String("dir", filepath.Join(root, "_output", "local"), "directory for the kubeconfig, certificates and logs")
	gatekeeper := flag.String("gatekeeper", filepath.Join(root, "bin", "gatekeeper"), "Gatekeeper binary: built with the plugin (make gatekeeper), or with --stock Gatekeeper's own build (make gatekeeper-stock)")
	stock := flag.Bool("stock", false, "run the second admission mode: a stock Gatekeeper (--gatekeeper) running the templates' External Data twins, which ask the manager's provider")
	manager := flag.String("manager", filepath.Join(root, "bin", "quotakeeper-manager"), "quotakeeper manager binary")
	replicas := flag.Int("gatekeeper-replicas", 1, "Gatekeeper processes behind the webhook load balancer")
	samples := flag.String("samples", filepath.Join(root, "config", "samples"), "example objects to apply")
	interval := flag.Duration("interval", 2*time.Second, "how often to refresh the usage table")
	printVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *printVersion {
		fmt.Println(version.String("quotakeeper-local"))
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := localcluster.Options{Dir: *dir, Gatekeeper: *gatekeeper, GatekeeperReplicas: *replicas, Manager: *manager, ExternalData: *stock}
	if err := run(ctx, opts, *samples, *interval); err != nil {
		fmt.Fprintln(os.Stderr, "quotakeeper-local:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, opts localcluster.Options, samples string, interval time.Duration) error {
	dir := opts.Dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mode := "Gatekeeper with the quotakeeper plugin"
	if opts.ExternalData {
		mode = "stock Gatekeeper (quota through External Data)"
	}
	fmt.Printf("starting etcd, kube-apiserver, %s and the quotakeeper manager ...\n", mode)
	c, err := localcluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer c.Stop()

	// The chart's SyncSet and templates, then the samples.
	if err := c.Apply(ctx, 2*time.Minute, c.Chart.Kinds("SyncSet", "ConstraintTemplate")...); err != nil {
		return err
	}
	sampleYAML, err := sampleFiles(samples)
	if err != nil {
		return err
	}
	fmt.Printf("applied the chart's SyncSet and templates; applying %d sample files from %s ...\n", len(sampleYAML), samples)
	if err := c.ApplyFiles(ctx, 2*time.Minute, sampleYAML...); err != nil {
		return err
	}
	fmt.Printf("\nready. In another terminal:\n\n  export KUBECONFIG=%s\n  kubectl get quotakeeper -A\n\nlogs are in %s; Ctrl-C stops everything.\n\n", c.Kubeconfig, dir)

	var last []byte
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		var buf bytes.Buffer
		if err := usageTable(ctx, c.Client, &buf); err == nil && !bytes.Equal(buf.Bytes(), last) {
			fmt.Printf("%s\n%s\n", time.Now().Format(time.TimeOnly), buf.String())
			last = buf.Bytes()
		}
		select {
		case <-ctx.Done():
			fmt.Println("stopping ...")
			return nil
		case <-ticker.C:
		}
	}
}

// usageTable is the live table: what `kubectl quota usage -A -o wide`
// prints (every bucket, in display units with the base units beside, and
// what each namespace uses of a shared bucket), through the same printer.
func usageTable(ctx context.Context, c client.Client, w io.Writer) error {
	rows, err := usage.ClusterRows(ctx, c)
	if err != nil {
		return err
	}
	if err := usage.WithUnits(ctx, c, rows); err != nil {
		return err
	}
	return usage.Print(w, rows, true)
}

// sampleFiles lists the YAML under dir in lexical order: file names carry a
// numeric prefix so registrations come before grants, templates before
// constraints.
func sampleFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (filepath.Ext(path) == ".yaml" || filepath.Ext(path) == ".yml") {
			files = append(files, path)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}
