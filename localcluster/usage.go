package localcluster

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/labels"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// UsageTable renders every AllowanceBucket as a table: what `make run`
// prints while it stays up.
func (c *Cluster) UsageTable(ctx context.Context, w io.Writer) error {
	var list quotav1alpha1.AllowanceBucketList
	if err := c.Client.List(ctx, &list); err != nil {
		return err
	}
	slices.SortFunc(list.Items, func(a, b quotav1alpha1.AllowanceBucket) int {
		return strings.Compare(a.Spec.ConsumerRef.Name+a.Spec.ResourceType, b.Spec.ConsumerRef.Name+b.Spec.ResourceType)
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONSUMER\tRESOURCE TYPE\tDIMENSIONS\tLIMIT\tALLOCATED\tRESERVED\tAVAILABLE")
	for _, b := range list.Items {
		c := b.Spec.ConsumerRef
		dims := labels.Set(b.Spec.Dimensions).String()
		if dims == "" {
			dims = "-"
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%d\t%d\t%d\t%d\n", c.Kind, c.Name, b.Spec.ResourceType, dims,
			b.Status.Limit, b.Status.Allocated, b.Status.Reserved, b.Status.Available)
	}
	return tw.Flush()
}
