package usage

import (
	"context"
	"io"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/delegation"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// Delegation is a parent's cap to hand out one resource type, and what its
// admin has done with it: handed out (counted), in flight (admitted, not
// yet counted), available, and what the children it was handed to use. It
// is also what -o json and -o yaml print, in base units.
type Delegation struct {
	Parent       quotav1alpha1.ConsumerRef `json:"parent"`
	ResourceType string                    `json:"resourceType"`
	Unit         quotav1alpha1.Units       `json:"unit"`
	Cap          int64                     `json:"cap"`
	HandedOut    int64                     `json:"handedOut"`
	InFlight     int64                     `json:"inFlight"`
	Available    int64                     `json:"available"`
	// Used is what the children listed use of the resource type.
	Used     int64   `json:"used"`
	Children []Child `json:"children,omitempty"`
}

// Child is one consumer a parent handed part of its cap to: how much (and
// through which grants), its whole limit (with the platform's own grants)
// and what it uses.
type Child struct {
	Consumer  quotav1alpha1.ConsumerRef `json:"consumer"`
	Grants    []string                  `json:"grants"`
	HandedOut int64                     `json:"handedOut"`
	Limit     int64                     `json:"limit"`
	Used      int64                     `json:"used"`
}

// DelegationRows is every cap to hand out the caller can see, with its
// children: in namespace ns, the caps of the consumers ns belongs to (read
// from its EffectiveResourceGrants, as NamespaceRows does) and the hand-outs
// made into ns; with ns empty, every cap and hand-out in the cluster. An
// organization's admin, bound in each of its namespaces, asks one
// namespace at a time; the platform asks for all.
func DelegationRows(ctx context.Context, c client.Client, ns string) ([]Delegation, error) {
	var usageRows []Row
	var err error
	if ns == "" {
		usageRows, err = ClusterRows(ctx, c)
	} else {
		usageRows, err = NamespaceRows(ctx, c, ns)
	}
	if err != nil {
		return nil, err
	}
	if err := WithUnits(ctx, c, usageRows); err != nil {
		return nil, err
	}
	var grants quotav1alpha1.ResourceGrantList
	if err := c.List(ctx, &grants, client.InNamespace(ns)); err != nil && !apierrors.IsForbidden(err) {
		return nil, err
	}
	tally, _ := delegation.Count(grants.Items)
	var out []Delegation
	for _, r := range usageRows {
		base, ok := quotav1alpha1.DelegatedBase(r.ResourceType)
		if !ok {
			continue
		}
		d := Delegation{Parent: r.Consumer, ResourceType: base, Unit: r.Unit, Cap: r.Limit,
			HandedOut: r.Used, InFlight: r.Reserved, Available: r.Available}
		for _, h := range tally[delegation.Key(ledgerconv.Consumer(r.Consumer), base)] {
			consumer := ledgerconv.ConsumerRef(h.Consumer)
			i := slices.IndexFunc(d.Children, func(c Child) bool { return c.Consumer == consumer })
			if i < 0 {
				d.Children = append(d.Children, Child{Consumer: consumer})
				i = len(d.Children) - 1
				for _, u := range usageRows {
					if u.Consumer == consumer && u.ResourceType == base {
						d.Children[i].Limit += u.Limit
						d.Children[i].Used += u.Used
					}
				}
				d.Used += d.Children[i].Used
			}
			d.Children[i].HandedOut += h.Amount
			d.Children[i].Grants = append(d.Children[i].Grants, h.Grant)
		}
		out = append(out, d)
	}
	return out, nil
}

var delegationColumns = []metav1.TableColumnDefinition{
	{Name: "Parent Kind", Type: "string"},
	{Name: "Parent", Type: "string"},
	{Name: "Resource Type", Type: "string"},
	{Name: "Cap", Type: "string"},
	{Name: "Handed Out", Type: "string"},
	{Name: "In Flight", Type: "string"},
	{Name: "Available", Type: "string"},
	{Name: "Limit", Type: "string"},
	{Name: "Used", Type: "string"},
	{Name: "Grants", Type: "string", Priority: 1},
}

// DelegationTable is the rows as a table: one row per cap (what the
// children listed use together under USED), then one indented row per
// child with what it was handed out, its whole limit (the platform's
// grants and the hand-outs) and what it uses.
func DelegationTable(rows []Delegation, wide bool) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: delegationColumns}
	for _, d := range rows {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			d.Parent.Kind, ConsumerName(d.Parent), d.ResourceType,
			Amount(d.Unit, d.Cap, wide), Amount(d.Unit, d.HandedOut, wide), Amount(d.Unit, d.InFlight, wide),
			// Ends at USED: trailing empty cells would leave trailing blanks.
			Amount(d.Unit, d.Available, wide), "", Amount(d.Unit, d.Used, wide),
		}})
		for _, c := range d.Children {
			t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
				"  " + c.Consumer.Kind, ConsumerName(c.Consumer), "", "", Amount(d.Unit, c.HandedOut, wide), "", "",
				Amount(d.Unit, c.Limit, wide), Amount(d.Unit, c.Used, wide), strings.Join(c.Grants, ","),
			}})
		}
	}
	return t
}

// PrintDelegations writes the rows as kubectl prints a table.
func PrintDelegations(w io.Writer, rows []Delegation, wide bool) error {
	return printers.NewTablePrinter(printers.PrintOptions{Wide: wide}).PrintObj(DelegationTable(rows, wide), w)
}
