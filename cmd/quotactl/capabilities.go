package main

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
)

func newCapabilitiesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "capabilities",
		Short: "Print OPA's capabilities with the quota builtins declared (rego/capabilities.json)",
		Long: `Print OPA's capabilities for the linked OPA version plus the declarations of
the quota builtins (quota.reserve, quota.usage, quota.quantity, quota.display,
quota.policy_claim), as JSON. Any OPA tool given
this file (opa check/test --capabilities, editors) type-checks calls to the
quota builtins. The committed copy is rego/capabilities.json:

  quotactl capabilities > rego/capabilities.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := CapabilitiesJSON()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
}

// CapabilitiesJSON is the exact content of rego/capabilities.json.
func CapabilitiesJSON() ([]byte, error) {
	out, err := json.MarshalIndent(builtins.Capabilities(), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
