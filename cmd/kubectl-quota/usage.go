package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakeeper/quotakeeper/internal/usage"
)

func newUsageCommand(o *options) *cobra.Command {
	var allNamespaces bool
	var output string
	cmd := &cobra.Command{
		Use:   "usage [-n namespace | -A]",
		Short: "Used, reserved, limit and available quota per consumer, resource type and dimensions",
		Long: `Prints one row per bucket: a consumer's quota for one resource type in one set
of dimensions, in the registration's display units. In a namespace (-n, or
the context's), the rows are those of every consumer that applies to it: the
namespace itself and the consumers its labels name (an organization, say); a
request must fit in all of them. With -A, every bucket in the cluster.
-o wide adds the base-unit amounts, the bucket, and for a consumer shared by
several namespaces what each namespace uses.`,
		Example: `  kubectl quota usage -n team-a
  kubectl quota usage -A -o wide`,
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
			ctx := cmd.Context()
			ns := ""
			var rows []usage.Row
			if allNamespaces {
				rows, err = usage.ClusterRows(ctx, c)
			} else {
				if ns, err = o.namespace(); err != nil {
					return err
				}
				rows, err = usage.NamespaceRows(ctx, c, ns)
			}
			if err != nil {
				return err
			}
			if err := usage.WithUnits(ctx, c, rows); err != nil {
				return err
			}
			if len(rows) == 0 && (output == "" || output == "wide") {
				// As kubectl get says it: on stderr, so a script reading
				// stdout sees no rows.
				if allNamespaces {
					fmt.Fprintln(o.errOut, "No quota found.")
				} else {
					fmt.Fprintf(o.errOut, "No quota found in %s namespace.\n", ns)
				}
				return nil
			}
			if output == "" || output == "wide" {
				return usage.Print(o.out, rows, output == "wide")
			}
			obj, err := list(rows)
			if err != nil {
				return err
			}
			return p.PrintObj(obj, o.out)
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Every bucket in the cluster, not the consumers of one namespace")
	addOutputFlag(cmd, &output)
	return cmd
}

// list is the rows as cli-runtime's JSON and YAML printers print them: a
// v1 List, as `kubectl get -o json` prints several objects, whose items are
// the rows (base units, with the unit to show them in).
func list[T any](rows []T) (runtime.Object, error) {
	items := make([]any, 0, len(rows))
	for i := range rows {
		// The converter keeps int64 amounts exact (a JSON round trip
		// through float64 would not, past 2^53).
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&rows[i])
		if err != nil {
			return nil, err
		}
		items = append(items, m)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "List",
		"metadata":   map[string]any{"resourceVersion": ""},
		"items":      items,
	}}, nil
}
