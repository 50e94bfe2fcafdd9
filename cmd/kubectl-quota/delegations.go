package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/quotakeeper/quotakeeper/internal/usage"
)

func newDelegationsCommand(o *options) *cobra.Command {
	var allNamespaces bool
	var output string
	cmd := &cobra.Command{
		Use:   "delegations [-n namespace | -A]",
		Short: "Caps to hand out: cap, handed out, in flight, available and used, per parent and child",
		Long: `Prints one row per cap a parent consumer (an organization, say) may hand out
to its children, with what its admins have handed out (counted), what is in
flight (admitted, not yet counted), what is left and what the children use;
then one indented row per child: what it was handed, its whole limit (with
the platform's own grants) and what it uses. In a namespace (-n, or the
context's), the caps of the consumers it belongs to and the hand-outs made
into it, which is what an organization's admin may read there; with -A,
every cap and hand-out in the cluster. -o wide adds the grants.`,
		Example: `  kubectl quota delegations -n team-a
  kubectl quota delegations -A -o wide`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := printer(output)
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			ns := ""
			if !allNamespaces {
				if ns, err = o.namespace(); err != nil {
					return err
				}
			}
			rows, err := usage.DelegationRows(cmd.Context(), c, ns)
			if err != nil {
				return err
			}
			wide := output == "wide"
			if output == "" || wide {
				if len(rows) == 0 {
					if allNamespaces {
						fmt.Fprintln(o.errOut, "No caps to hand out found.")
					} else {
						fmt.Fprintf(o.errOut, "No caps to hand out found in %s namespace.\n", ns)
					}
					return nil
				}
				return usage.PrintDelegations(o.out, rows, wide)
			}
			obj, err := list(rows)
			if err != nil {
				return err
			}
			return p.PrintObj(obj, o.out)
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Every cap and hand-out in the cluster, not those of one namespace")
	addOutputFlag(cmd, &output)
	return cmd
}
