package usage

import (
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// Amount is one cell: display units, and in the wide table the base-unit
// amount the API holds beside it when the two differ.
func Amount(u quotav1alpha1.Units, v int64, wide bool) string {
	shown := u.Format(v)
	if wide && u.HasDisplay() {
		return shown + " (" + u.Base(v) + ")"
	}
	return shown
}

// columns: the bucket's name only in the wide table (priority 1).
var columns = []metav1.TableColumnDefinition{
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

// Table is the rows as a table. The wide one follows a bucket that
// several namespaces may share (any consumer but a Namespace) with one
// indented row per namespace that uses it, showing what that namespace uses.
func Table(rows []Row, wide bool) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: columns}
	for _, r := range rows {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			r.Consumer.Kind, ConsumerName(r.Consumer), r.ResourceType, Dimensions(r.Dimensions),
			Amount(r.Unit, r.Used, wide), Amount(r.Unit, r.Reserved, wide),
			Amount(r.Unit, r.Limit, wide), Amount(r.Unit, r.Available, wide),
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
				"", "  " + name, "", "", Amount(r.Unit, n.Allocated, wide),
			}})
		}
	}
	return t
}

// Print writes the rows as kubectl prints a table (the wide one with -o
// wide): `kubectl quota usage` and the live table of `make run` both print
// through it.
func Print(w io.Writer, rows []Row, wide bool) error {
	return printers.NewTablePrinter(printers.PrintOptions{Wide: wide}).PrintObj(Table(rows, wide), w)
}
