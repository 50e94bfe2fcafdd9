package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/verify"
	"github.com/spf13/cobra"

	"github.com/quotakeeper/quotakeeper/cmd/quotactl/internal/suite"
)

func newVerifyCommand() *cobra.Command {
	var run string
	var verbose, trace bool
	c := &cobra.Command{
		Use:   "verify PATH",
		Short: "Run gator test suites of quota ConstraintTemplates against an in-memory ledger",
		Long: `Run the gator Suites (test.gatekeeper.sh/v1alpha1) in PATH: a suite file, or
every suite in a directory and its subdirectories (PATH and PATH/... mean the
same). Reviews run through gator's verify with the quota builtins registered;
each case gets a fresh in-memory ledger holding the grants of its quota files.
Suites may use quotakeeper's extensions (quota, admission, steps, usage); see
docs/policy-authoring.md.`,
		Example: `  quotactl verify templates/
  quotactl verify templates/quotaentity/suite.yaml --run 'shared//'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			filter, err := verify.NewFilter(run)
			if err != nil {
				return err
			}
			original := filepath.Clean(strings.TrimSuffix(args[0], "..."))
			abs, err := filepath.Abs(original)
			if err != nil {
				return err
			}
			if original == "." {
				// gator names results by cutting this path out of each
				// suite's path; "." would cut at the first dot.
				original = abs
			}
			// gator addresses every file from the root of one file system.
			fsys := os.DirFS("/")
			target := strings.Trim(filepath.ToSlash(abs), "/")
			info, err := os.Stat(abs)
			if err != nil {
				return err
			}
			suites, err := suite.Read(fsys, target, original, info.IsDir())
			if err != nil {
				return err
			}
			if len(suites) == 0 {
				return fmt.Errorf("no suites (kind Suite, apiVersion test.gatekeeper.sh/v1alpha1) in %s", args[0])
			}
			runner, err := suite.NewRunner(fsys, trace)
			if err != nil {
				return err
			}
			var results []verify.SuiteResult
			failed := false
			for _, s := range suites {
				r := runner.Run(cmd.Context(), filter, s)
				failed = failed || r.IsFailure()
				results = append(results, r)
			}
			var out strings.Builder
			if err := (verify.PrinterGo{}).Print(&out, results, verbose); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), out.String())
			if failed {
				return errors.New("FAIL")
			}
			return nil
		},
	}
	c.Flags().StringVarP(&run, "run", "r", "", "regular expression selecting tests and cases by name, as in gator verify (test//case)")
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every test and case")
	c.Flags().BoolVarP(&trace, "trace", "t", false, "include Rego traces of failing cases")
	return c
}
