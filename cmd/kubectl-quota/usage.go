package main

import (
	"context"
	"fmt"
	"sort"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
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
			var rows []usageRow
			if allNamespaces {
				rows, err = clusterUsage(ctx, c)
			} else {
				if ns, err = o.namespace(); err != nil {
					return err
				}
				rows, err = namespaceUsage(ctx, c, ns)
			}
			if err != nil {
				return err
			}
			if err := withUnits(ctx, c, rows); err != nil {
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
				return p.PrintObj(usageTable(rows, output == "wide"), o.out)
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

// usageRow is one bucket's figures, in base units as the API holds them; the
// unit says how to show them. It is also what -o json and -o yaml print.
type usageRow struct {
	Consumer        quotav1alpha1.ConsumerRef `json:"consumer"`
	ResourceType    string                    `json:"resourceType"`
	Dimensions      map[string]string         `json:"dimensions,omitempty"`
	Bucket          string                    `json:"bucket"`
	BucketNamespace string                    `json:"bucketNamespace"`
	Unit            unit                      `json:"unit"`
	Used            int64                     `json:"used"`
	Reserved        int64                     `json:"reserved"`
	Limit           int64                     `json:"limit"`
	Available       int64                     `json:"available"`
	// Namespaces is what each namespace's objects use of a bucket; absent
	// when the bucket itself could not be read (a tenant reading an
	// organization's figures through its EffectiveResourceGrant).
	Namespaces []quotav1alpha1.NamespaceUsage `json:"namespaces,omitempty"`
}

func rowOfBucket(b *quotav1alpha1.AllowanceBucket) usageRow {
	return usageRow{
		Consumer:        b.Spec.ConsumerRef,
		ResourceType:    b.Spec.ResourceType,
		Dimensions:      b.Spec.Dimensions,
		Bucket:          b.Name,
		BucketNamespace: b.Namespace,
		Used:            b.Status.Allocated,
		Reserved:        b.Status.Reserved,
		Limit:           b.Status.Limit,
		Available:       b.Status.Available,
		Namespaces:      b.Status.Namespaces,
	}
}

// clusterUsage is every bucket in the cluster.
func clusterUsage(ctx context.Context, c client.Client) ([]usageRow, error) {
	var buckets quotav1alpha1.AllowanceBucketList
	if err := c.List(ctx, &buckets); err != nil {
		return nil, err
	}
	rows := make([]usageRow, 0, len(buckets.Items))
	for i := range buckets.Items {
		rows = append(rows, rowOfBucket(&buckets.Items[i]))
	}
	sortRows(rows)
	return rows, nil
}

// namespaceUsage is the buckets of every consumer that applies to the
// namespace. The namespace's EffectiveResourceGrants say which those are:
// the effective controller keeps one per consumer and resource type in
// every namespace that belongs to the consumer (v1alpha1.NamespaceBelongsTo),
// and a tenant may read them, whereas an organization's buckets live in the
// system namespace, which tenants cannot read. The bucket's own status is
// the source of truth, so it is read when allowed; otherwise the copy in the
// EffectiveResourceGrant is shown.
func namespaceUsage(ctx context.Context, c client.Client, ns string) ([]usageRow, error) {
	var ergs quotav1alpha1.EffectiveResourceGrantList
	if err := c.List(ctx, &ergs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	buckets := bucketReader{c: c}
	var rows []usageRow
	for _, e := range ergs.Items {
		for _, ref := range e.Status.AllowanceBucketRefs {
			b, err := buckets.get(ctx, ref.Namespace, ref.Name)
			if err != nil {
				return nil, err
			}
			if b != nil {
				rows = append(rows, rowOfBucket(b))
				continue
			}
			rows = append(rows, usageRow{
				Consumer:        e.Spec.ConsumerRef,
				ResourceType:    e.Spec.ResourceType,
				Dimensions:      ref.Dimensions,
				Bucket:          ref.Name,
				BucketNamespace: ref.Namespace,
				Used:            ref.Allocated,
				Reserved:        ref.Reserved,
				Limit:           ref.Limit,
				Available:       ref.Available,
			})
		}
	}
	sortRows(rows)
	return rows, nil
}

// bucketReader reads buckets once each, and reports one the caller may not
// read (or that is gone) as nil rather than as an error: the caller has
// another copy of the figures.
type bucketReader struct {
	c    client.Client
	seen map[client.ObjectKey]*quotav1alpha1.AllowanceBucket
}

func (r *bucketReader) get(ctx context.Context, ns, name string) (*quotav1alpha1.AllowanceBucket, error) {
	key := client.ObjectKey{Namespace: ns, Name: name}
	if b, ok := r.seen[key]; ok {
		return b, nil
	}
	if r.seen == nil {
		r.seen = map[client.ObjectKey]*quotav1alpha1.AllowanceBucket{}
	}
	b := &quotav1alpha1.AllowanceBucket{}
	if err := r.c.Get(ctx, key, b); err != nil {
		if !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err) {
			return nil, err
		}
		b = nil
	}
	r.seen[key] = b
	return b, nil
}

// withUnits sets each row's unit from its resource type's registration.
func withUnits(ctx context.Context, c client.Client, rows []usageRow) error {
	us, err := units(ctx, c)
	if err != nil {
		return err
	}
	for i := range rows {
		rows[i].Unit = us[rows[i].ResourceType]
	}
	return nil
}

func sortRows(rows []usageRow) {
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		ka := []string{a.Consumer.Kind, a.Consumer.Namespace, a.Consumer.Name, a.ResourceType, dimensions(a.Dimensions)}
		kb := []string{b.Consumer.Kind, b.Consumer.Namespace, b.Consumer.Name, b.ResourceType, dimensions(b.Dimensions)}
		for k := range ka {
			if ka[k] != kb[k] {
				return ka[k] < kb[k]
			}
		}
		return false
	})
}

// dimensions shows a dimension set as a label selector does, sorted:
// "region=dfw,tier=gold"; none as kubectl shows an empty field.
func dimensions(d map[string]string) string {
	if len(d) == 0 {
		return "<none>"
	}
	return labels.Set(d).String()
}

// consumerName is a consumer's name, with its namespace when it has one.
func consumerName(c quotav1alpha1.ConsumerRef) string {
	if c.Namespace != "" {
		return c.Namespace + "/" + c.Name
	}
	return c.Name
}

// amount is one cell: display units, and in the wide table the base-unit
// amount the API holds beside it when the two differ.
func amount(u unit, v int64, wide bool) string {
	shown := u.format(v)
	if wide && u.DisplayUnit != "" {
		return shown + " (" + u.base(v) + ")"
	}
	return shown
}

// usageColumns: the bucket's name only in the wide table (priority 1).
var usageColumns = []metav1.TableColumnDefinition{
	{Name: "Consumer Kind", Type: "string"},
	{Name: "Consumer", Type: "string"},
	{Name: "Resource Type", Type: "string"},
	{Name: "Dimensions", Type: "string"},
	{Name: "Used", Type: "string"},
	{Name: "Reserved", Type: "string"},
	{Name: "Limit", Type: "string"},
	{Name: "Available", Type: "string"},
	{Name: "Bucket", Type: "string", Priority: 1},
}

// usageTable is the rows as a table. The wide one follows a bucket that
// several namespaces may share (any consumer but a Namespace) with one
// indented row per namespace that uses it, showing what that namespace uses.
func usageTable(rows []usageRow, wide bool) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: usageColumns}
	for _, r := range rows {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			r.Consumer.Kind, consumerName(r.Consumer), r.ResourceType, dimensions(r.Dimensions),
			amount(r.Unit, r.Used, wide), amount(r.Unit, r.Reserved, wide),
			amount(r.Unit, r.Limit, wide), amount(r.Unit, r.Available, wide),
			r.BucketNamespace + "/" + r.Bucket,
		}})
		if !wide || r.Consumer.IsNamespace() {
			continue
		}
		for _, n := range r.Namespaces {
			name := n.Namespace
			if name == "" {
				name = "(cluster-scoped)"
			}
			// The row ends at USED: the tab writer pads every cell but a
			// line's last, so trailing empty cells would leave trailing
			// blanks.
			t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
				"", "  " + name, "", "", amount(r.Unit, n.Allocated, wide),
			}})
		}
	}
	return t
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
