// Command quotakeeper-load is `make load`: the load harness of issue 10. It
// starts the local cluster (package localcluster: etcd, kube-apiserver,
// Gatekeeper with the plugin behind the loopback balancer, the manager) at
// Gatekeeper's default audit interval, then measures ConfigMap creates from
// many concurrent creators through its phases, each a run of its own on
// namespaces of its own. With -modes builtins,externalData (make load
// GATEKEEPER=stock) it runs them again on a stock Gatekeeper whose
// templates are the External Data twins (the manager's provider decides),
// and ends with phase (c) of both modes side by side (modes.go):
//
//	(a) no constraint matches
//	(b) a no-op constraint (a template that never denies)
//	(c) a QuotaEntity constraint on one Organization bucket shared by every
//	    namespace of the phase, with plenty of quota
//	(d) in-tree ResourceQuota, one per namespace
//	(e) the shared quota of (c) with a limit of half the creates
//	(f) the shared quota of (c) with many objects already counted (prefilled
//	    through the same quota path)
//	(h) (c) again right after (f), nothing counted in its bucket: the
//	    cluster's extra objects without the count (f/h beside f/c)
//	(r) a manager restart with 1 and with -restart-objects objects counted:
//	    how long until a create made at the restart is counted (restart.go)
//
// For each it prints the rate, p50/p99 latency and failures; for the quota
// phases, after quiescence, the bucket's counted usage against a fresh count
// of the live objects, its reservations and its serialized size; then the
// ratios c/d, c/b and f/c. It exits 1 when an invariant fails (more admitted
// than the limit, usage not equal to the live objects after quiescence,
// reservations that never drain), never for a slow rate. docs/operations.md
// ("Load runs") says how to read it.
//
// A binary and not a test: a run takes many minutes, must never be part of
// `go test ./...`, and is driven by flags; its pure arithmetic is unit-tested
// (stats_test.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/quotakeeper/quotakeeper/internal/checkout"
	"github.com/quotakeeper/quotakeeper/internal/version"
)

type config struct {
	namespaces, creates, creators, prefill int
	restartObjects                         int
	// downtime is how long phase (g) keeps creating with the manager down.
	downtime                 time.Duration
	replicas                 []int
	grant                    int64
	phases                   map[string]bool
	dir, gatekeeper, manager string
	// stockGatekeeper is Gatekeeper's own build, which the External Data
	// mode runs (modes).
	stockGatekeeper string
	// modes are the admission modes measured, each on clusters of its
	// own: builtins (Gatekeeper with the plugin) and externalData (a stock
	// Gatekeeper, the templates' twins, the manager's provider).
	modes                                   []string
	audit, quiesce, requestTimeout          time.Duration
	pprofDir                                string
	managerArgs, gatekeeperArgs, managerEnv []string
	pprofLength                             time.Duration
}

func main() {
	root, err := checkout.Root()
	if err != nil {
		fatal(err)
	}
	var cfg config
	var replicas, phases, modes string
	flag.IntVar(&cfg.namespaces, "namespaces", 100, "namespaces per phase")
	flag.IntVar(&cfg.creates, "creates", 20, "creates per namespace in each measured phase")
	flag.IntVar(&cfg.creators, "creators", 100, "concurrent creators")
	flag.IntVar(&cfg.prefill, "prefill", 20000, "objects counted in the shared bucket before phase (f) is measured")
	flag.IntVar(&cfg.restartObjects, "restart-objects", 100_000, "objects counted before the manager restart of phase (r)")
	flag.DurationVar(&cfg.downtime, "downtime", 10*time.Minute, "how long phase (g) keeps creating with the manager down")
	flag.Int64Var(&cfg.grant, "grant", 1_000_000, "the shared bucket's grant in phases (c) and (f)")
	flag.StringVar(&replicas, "replicas", "1,3", "Gatekeeper replica counts, comma-separated: the whole run once per count, on a fresh cluster")
	flag.StringVar(&phases, "phases", "a,b,c,d,e,f,h,v,r", "phases to run, comma-separated")
	flag.StringVar(&cfg.dir, "dir", filepath.Join(root, "_output", "load"), "directory for each cluster's kubeconfig, certificates and logs (replaced)")
	flag.StringVar(&cfg.gatekeeper, "gatekeeper", filepath.Join(root, "bin", "gatekeeper"), "Gatekeeper binary built with the plugin (make gatekeeper)")
	flag.StringVar(&cfg.stockGatekeeper, "stock-gatekeeper", "", "stock Gatekeeper binary (make gatekeeper-stock), for -modes externalData")
	flag.StringVar(&modes, "modes", modeBuiltins, "admission modes to measure, comma-separated: "+modeBuiltins+", "+modeLeases+" (builtins with capacity leases), "+modeExternalData+"; with several, the report ends with phase (c) of each side by side (make load GATEKEEPER=stock; make load LOAD_FLAGS='-modes builtins,leases')")
	flag.StringVar(&cfg.manager, "manager", filepath.Join(root, "bin", "quotakeeper-manager"), "quotakeeper manager binary (make manager)")
	flag.DurationVar(&cfg.audit, "audit-interval", 60*time.Second, "Gatekeeper's audit interval (60 s is Gatekeeper's default)")
	flag.DurationVar(&cfg.quiesce, "quiesce-timeout", 5*time.Minute, "how long a quota phase may take to settle (usage equal to the live objects, no reservations) before it fails")
	flag.DurationVar(&cfg.requestTimeout, "request-timeout", 30*time.Second, "client timeout of one create")
	flag.StringVar(&cfg.pprofDir, "pprof", "", "directory to write CPU profiles of kube-apiserver, Gatekeeper replica 0 and the manager into, taken while each phase's creates run; empty takes none")
	flag.DurationVar(&cfg.pprofLength, "pprof-seconds", 5*time.Second, "length of each -pprof profile, from the start of a phase's creates")
	flag.Func("manager-arg", "an extra flag for the manager, e.g. -manager-arg=--object-claims=false (repeat for more): to measure what a setting costs", func(v string) error {
		cfg.managerArgs = append(cfg.managerArgs, v)
		return nil
	})
	flag.Func("manager-env", "an extra KEY=VALUE environment variable for the manager, e.g. -manager-env=GOGC=400 (repeat for more)", func(v string) error {
		if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
			return fmt.Errorf("want KEY=VALUE, got %q", v)
		}
		cfg.managerEnv = append(cfg.managerEnv, v)
		return nil
	})
	flag.Func("gatekeeper-arg", "an extra flag for every Gatekeeper replica (repeat for more)", func(v string) error {
		cfg.gatekeeperArgs = append(cfg.gatekeeperArgs, v)
		return nil
	})
	printVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *printVersion {
		fmt.Println(version.String("quotakeeper-load"))
		return
	}

	if cfg.replicas, err = parseInts(replicas); err != nil {
		fatal(fmt.Errorf("-replicas: %w", err))
	}
	if cfg.phases, err = parsePhases(phases); err != nil {
		fatal(fmt.Errorf("-phases: %w", err))
	}
	if cfg.modes, err = parseModes(modes); err != nil {
		fatal(fmt.Errorf("-modes: %w", err))
	}
	if cfg.namespaces < 1 || cfg.creates < 1 || cfg.creators < 1 || cfg.prefill < 0 || cfg.restartObjects < 0 {
		fatal(fmt.Errorf("-namespaces, -creates and -creators must be at least 1, -prefill and -restart-objects at least 0"))
	}
	for _, bin := range []string{cfg.gatekeeper, cfg.manager} {
		if _, err := os.Stat(bin); err != nil {
			fatal(fmt.Errorf("%s missing: run 'make gatekeeper manager' (make load builds them)", bin))
		}
	}
	if slices.Contains(cfg.modes, modeExternalData) {
		if _, err := os.Stat(cfg.stockGatekeeper); cfg.stockGatekeeper == "" || err != nil {
			fatal(fmt.Errorf("-stock-gatekeeper %q missing: run 'make gatekeeper-stock' (make load GATEKEEPER=stock builds it)", cfg.stockGatekeeper))
		}
	}

	// The report is the output: controller-runtime's own logs (envtest's)
	// are not wanted, and unset they print a stack trace after 30 s.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var violations []string
	var runs []*harness
	for _, mode := range cfg.modes {
		for _, n := range cfg.replicas {
			h, err := runOnce(ctx, cfg, mode, n)
			if err != nil {
				stop()
				fatal(err)
			}
			runs = append(runs, h)
			violations = append(violations, h.violations...)
		}
	}
	if len(cfg.modes) > 1 {
		compareModes(os.Stdout, runs)
	}
	if len(violations) > 0 {
		fmt.Printf("\nINVARIANTS FAILED (%d):\n", len(violations))
		for _, v := range violations {
			fmt.Println("  - " + v)
		}
		stop()
		os.Exit(1)
	}
	fmt.Println("\nevery invariant held")
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "quotakeeper-load:", err)
	os.Exit(2)
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive integers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// The admission modes, as the chart's admission value names them.
const (
	// modeBuiltins and modeExternalData run with capacity leases off
	// (--quota-capacity-leases=false, the provider's --capacity-leases=false):
	// the synchronous path, as earlier figures were measured.
	modeBuiltins     = "builtins"
	modeExternalData = "externalData"
	// modeLeases is the builtin mode with the plugin's capacity leases on,
	// as the chart installs it.
	modeLeases = "leases"
)

func parseModes(s string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f != modeBuiltins && f != modeExternalData && f != modeLeases {
			return nil, fmt.Errorf("%q: want %s, %s or %s", f, modeBuiltins, modeLeases, modeExternalData)
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

func parsePhases(s string) (map[string]bool, error) {
	out := map[string]bool{}
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if len(f) != 1 || (f < "a" || f > "h") && f != "r" && f != "v" {
			return nil, fmt.Errorf("%q: want letters a to h, r or v", f)
		}
		out[f] = true
	}
	return out, nil
}
