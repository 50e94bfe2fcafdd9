package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	opacmd "github.com/open-policy-agent/opa/cmd"
	"github.com/spf13/cobra"

	"github.com/quotakeeper/quotakeeper/cmd/quotactl/internal/quotafile"
	"github.com/quotakeeper/quotakeeper/internal/builtins"
)

// newOPACommand is OPA's own command tree (test, eval, check, fmt, ...)
// under `quotactl opa`, in a process where the quota builtins are registered
// and backed by a memory-store ledger, so `quotactl opa test rego/` runs the
// library's tests against the real builtins rather than mocks. OPA's
// commands evaluate under contexts of their own, so the builtins find that
// ledger in env, the process's Env (builtins.Register).
func newOPACommand(env *atomic.Pointer[builtins.Env]) *cobra.Command {
	var quotaFiles []string
	c := &cobra.Command{
		Use:   "opa",
		Short: "OPA's CLI with the quota builtins over an in-memory ledger",
		Long: `OPA's CLI (the OPA version quotakeeper links) with quota.reserve, quota.usage,
quota.quantity, quota.display and quota.policy_claim registered. The builtins use an in-memory
ledger holding the grants of the --quota files, and the ClaimCreationPolicies
and the registrations' units of those files, fresh for each invocation and
shared by every test of it: tests that reserve must use consumers of their own.

  quotactl opa test --quota rego/testdata/quota.yaml rego/`,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var set quotafile.Set
			for _, f := range quotaFiles {
				fsys, name, err := osPath(f)
				if err != nil {
					return err
				}
				if err := set.Read(fsys, name); err != nil {
					return err
				}
			}
			l, err := set.Ledger()
			if err != nil {
				return err
			}
			env.Store(&builtins.Env{Ledger: l, ClaimPolicies: set.ClaimPolicies(), Units: &set})
			return nil
		},
	}
	c.PersistentFlags().StringArrayVar(&quotaFiles, "quota", nil,
		"YAML file of ResourceRegistrations, ResourceGrants and ClaimCreationPolicies for the in-memory ledger (repeatable; relative to the working directory)")
	return opacmd.Command(c, "quotactl opa")
}

// osPath returns a file system and a name in it for an OS path, relative to
// the working directory or absolute.
func osPath(p string) (fs.FS, string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, "", err
	}
	return os.DirFS("/"), strings.TrimPrefix(filepath.ToSlash(abs), "/"), nil
}
