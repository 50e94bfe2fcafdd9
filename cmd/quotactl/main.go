// Command quotactl is quotakeeper's offline tool for policy authors: it runs
// ConstraintTemplate test suites against an in-memory ledger (verify),
// generates the templates from the Rego sources (generate), prints the OPA
// capabilities that declare the quota builtins (capabilities), and runs OPA's
// own CLI with those builtins registered (opa). See docs/policy-authoring.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	opacmd "github.com/open-policy-agent/opa/cmd"
	"github.com/spf13/cobra"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/version"
)

func main() {
	// What the builtins decide against under `quotactl opa`, whose OPA
	// commands evaluate under contexts of their own: the process's Env.
	// verify's suites carry one per case instead.
	var opaEnv atomic.Pointer[builtins.Env]
	// Before any command compiles Rego: compilers copy the builtin table.
	if err := builtins.Register(opaEnv.Load); err != nil {
		fmt.Fprintln(os.Stderr, "quotactl:", err)
		os.Exit(1)
	}
	os.Exit(run(context.Background(), &opaEnv, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes quotactl and returns its exit code; `quotactl opa` sets
// opaEnv, the Env the builtins were registered with.
func run(ctx context.Context, opaEnv *atomic.Pointer[builtins.Env], args []string, stdout, stderr io.Writer) int {
	root := newRoot(opaEnv)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	// OPA's commands report through an exit code after printing their own
	// output; ours through the error.
	var exit *opacmd.ExitError
	if errors.As(err, &exit) {
		return exit.Exit
	}
	fmt.Fprintln(stderr, "quotactl:", err)
	return 1
}

func newRoot(opaEnv *atomic.Pointer[builtins.Env]) *cobra.Command {
	root := &cobra.Command{
		Use:           "quotactl",
		Short:         "Test and build quotakeeper's quota ConstraintTemplates offline",
		SilenceErrors: true,
		SilenceUsage:  true,
		// --version, as the servers have; `quotactl version` prints the same.
		Version: version.Version,
	}
	root.SetVersionTemplate(version.String("quotactl") + "\n")
	root.AddCommand(newVerifyCommand(), newGenerateCommand(), newCapabilitiesCommand(), newOPACommand(opaEnv), newVersionCommand())
	return root
}
