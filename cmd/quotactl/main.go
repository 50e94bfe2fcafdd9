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

	opacmd "github.com/open-policy-agent/opa/cmd"
	"github.com/spf13/cobra"

	"github.com/quotakeeper/quotakeeper/builtins"
	"github.com/quotakeeper/quotakeeper/version"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run executes quotactl and returns its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// Before any command compiles Rego: compilers copy the builtin table.
	builtins.Register()
	root := newRoot()
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

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "quotactl",
		Short:         "Test and build quotakeeper's quota ConstraintTemplates offline",
		SilenceErrors: true,
		SilenceUsage:  true,
		// --version, as the servers have; `quotactl version` prints the same.
		Version: version.Version,
	}
	root.SetVersionTemplate(version.String("quotactl") + "\n")
	root.AddCommand(newVerifyCommand(), newGenerateCommand(), newCapabilitiesCommand(), newOPACommand(), newVersionCommand())
	return root
}
