package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/quotakeeper/quotakeeper/rego"
)

func newGenerateCommand() *cobra.Command {
	var dir string
	var check bool
	c := &cobra.Command{
		Use:   "generate",
		Short: "Write templates/<name>/template.yaml from the Rego sources in rego/",
		Long: `Generate every ConstraintTemplate from rego/templates/<name> (skeleton.yaml and
src.rego) and the lib.quota library (rego/lib/quota.rego), and write it to
<dir>/<name>/template.yaml, and its stock-Gatekeeper twin (the same Rego
calling quotakeeper's External Data provider) to
<dir>/<name>/template-externaldata.yaml. With --check, write nothing and fail when any
file differs from what would be written (for make verify).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stale, err := Generate(dir, check)
			if err != nil {
				return err
			}
			if check && len(stale) > 0 {
				for _, f := range stale {
					fmt.Fprintln(cmd.ErrOrStderr(), "stale:", f)
				}
				return errors.New("generated templates are stale; run 'quotactl generate'")
			}
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", "templates", "directory holding one directory per template")
	c.Flags().BoolVar(&check, "check", false, "report stale files instead of writing them")
	return c
}

// Generate writes (or, with check, compares) every template under dir and
// returns the files that differed from the generated content.
func Generate(dir string, check bool) ([]string, error) {
	ts, err := rego.Templates()
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, t := range ts {
		for name, content := range map[string][]byte{"template.yaml": t.YAML, rego.ExternalDataFile: t.ExternalData} {
			file := filepath.Join(dir, t.Name, name)
			differs, err := writeIfChanged(file, content, check)
			if err != nil {
				return nil, err
			}
			if differs {
				stale = append(stale, file)
			}
		}
	}
	slices.Sort(stale)
	return stale, nil
}

// writeIfChanged writes content to file unless it holds it already, or with
// check only compares; it reports whether the file differed.
func writeIfChanged(file string, content []byte, check bool) (bool, error) {
	old, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	if bytes.Equal(old, content) {
		return false, nil
	}
	if check {
		return true, nil
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return false, err
	}
	return true, os.WriteFile(file, content, 0o644)
}
