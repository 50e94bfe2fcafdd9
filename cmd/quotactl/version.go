package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/quotakeeper/quotakeeper/internal/version"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print quotactl's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version.String("quotactl"))
			return err
		},
	}
}
