package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/usage"
)

func newExplainCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "explain (TYPE/NAME | TYPE NAME) [-n namespace]",
		Short: "What an object counts against quota, and the numbers of the buckets it counts in",
		Long: `Prints, for one object, what it counts against each consumer's quota: one
row per request of the ResourceClaim views the manager's observer writes for
it (labelled quota.miloapis.com/view=true), with the consumer, resource type,
dimensions and amount, and the used, reserved, limit and available of the
bucket it counts in. TYPE is resolved as kubectl resolves it: a resource, a
short name or a kind, optionally with its group (deployments.apps/web).`,
		Example: `  kubectl quota explain configmap/settings -n team-a
  kubectl quota explain namespace team-a -o yaml`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := printer(output)
			if err != nil {
				return err
			}
			typ, name, err := typeAndName(args)
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			obj, err := o.object(cmd.Context(), c, typ, name)
			if err != nil {
				return err
			}
			rows, err := o.explain(cmd.Context(), c, obj)
			if err != nil {
				return err
			}
			if output != "" && output != "wide" {
				obj, err := list(rows)
				if err != nil {
					return err
				}
				return p.PrintObj(obj, o.out)
			}
			if len(rows) == 0 {
				fmt.Fprintf(o.errOut, "%s counts against no quota.\n", describe(obj))
				return nil
			}
			return p.PrintObj(explainTable(rows, output == "wide"), o.out)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// typeAndName accepts kubectl's two spellings, TYPE/NAME and TYPE NAME.
func typeAndName(args []string) (string, string, error) {
	if len(args) == 2 {
		return args[0], args[1], nil
	}
	typ, name, ok := strings.Cut(args[0], "/")
	if !ok || typ == "" || name == "" {
		return "", "", fmt.Errorf("arguments in resource/name form must have a single resource and name, got %q", args[0])
	}
	return typ, name, nil
}

// object reads the object's metadata (all explain needs is its identity and
// uid, and metadata is what any reader may get). The type is resolved with
// kubectl's RESTMapper (discovery plus short names), in kubectl's order:
// as a resource, then as a kind.
func (o *options) object(ctx context.Context, c client.Client, typ, name string) (*metav1.PartialObjectMetadata, error) {
	mapper, err := o.flags.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	mapping, err := mappingFor(mapper, typ)
	if err != nil {
		return nil, err
	}
	key := client.ObjectKey{Name: name}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if key.Namespace, err = o.namespace(); err != nil {
			return nil, err
		}
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := c.Get(ctx, key, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// mappingFor is kubectl's resource.Builder mappingFor: the argument as a
// resource (configmaps, cm, deployments.apps), else as a kind (ConfigMap,
// Deployment.apps).
func mappingFor(mapper meta.RESTMapper, arg string) (*meta.RESTMapping, error) {
	fullGVR, groupResource := schema.ParseResourceArg(arg)
	gvk := schema.GroupVersionKind{}
	if fullGVR != nil {
		gvk, _ = mapper.KindFor(*fullGVR)
	}
	if gvk.Empty() {
		gvk, _ = mapper.KindFor(groupResource.WithVersion(""))
	}
	if !gvk.Empty() {
		return mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	fullGVK, groupKind := schema.ParseKindArg(arg)
	if fullGVK == nil {
		k := groupKind.WithVersion("")
		fullGVK = &k
	}
	if !fullGVK.Empty() {
		if mapping, err := mapper.RESTMapping(fullGVK.GroupKind(), fullGVK.Version); err == nil {
			return mapping, nil
		}
	}
	mapping, err := mapper.RESTMapping(groupKind)
	if meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("the server doesn't have a resource type %q", groupResource.Resource)
	}
	return mapping, err
}

// describe names the object as kubectl's messages do: Kind namespace/name.
func describe(obj *metav1.PartialObjectMetadata) string {
	if obj.Namespace != "" {
		return fmt.Sprintf("%s %s/%s", obj.Kind, obj.Namespace, obj.Name)
	}
	return fmt.Sprintf("%s %s", obj.Kind, obj.Name)
}

// explainRow is one request of one view: what the object counts against one
// consumer's bucket, and that bucket's figures (as `usage` prints them;
// absent when neither the bucket nor an EffectiveResourceGrant copy of it
// could be read).
type explainRow struct {
	View         string                    `json:"view"`
	Consumer     quotav1alpha1.ConsumerRef `json:"consumer"`
	ResourceType string                    `json:"resourceType"`
	Dimensions   map[string]string         `json:"dimensions,omitempty"`
	Amount       int64                     `json:"amount"`
	Unit         quotav1alpha1.Units       `json:"unit"`
	BucketRef    bucketRef                 `json:"bucketRef"`
	Bucket       *usage.Row                `json:"bucket,omitempty"`
}

type bucketRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// explain turns the object's views into rows.
func (o *options) explain(ctx context.Context, c client.Client, obj *metav1.PartialObjectMetadata) ([]explainRow, error) {
	views, err := o.views(ctx, c, obj)
	if err != nil {
		return nil, err
	}
	us, err := usage.Units(ctx, c)
	if err != nil {
		return nil, err
	}
	figures, err := o.bucketFigures(ctx, c, obj)
	if err != nil {
		return nil, err
	}
	var rows []explainRow
	for _, v := range views {
		consumer := v.Spec.ConsumerRef
		for _, req := range v.Spec.Requests {
			ref := bucketRef{
				Namespace: quotav1alpha1.BucketNamespace(consumer, o.systemNamespace),
				Name:      bucketName(v, consumer, req),
			}
			row := explainRow{
				View: v.Namespace + "/" + v.Name, Consumer: consumer, ResourceType: req.ResourceType,
				Dimensions: req.Dimensions, Amount: req.Amount, Unit: us[req.ResourceType], BucketRef: ref,
			}
			if b, err := figures(ctx, ref); err != nil {
				return nil, err
			} else if b != nil {
				// A tenant who may not read registrations has the units
				// from the EffectiveResourceGrant the figures came from.
				if row.Unit == (quotav1alpha1.Units{}) {
					row.Unit = b.Unit
				}
				b.Unit = row.Unit
				row.Bucket = b
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// views are the object's ResourceClaim views, by namespace and name. A view
// usually lives in the object's namespace, but a claim template may place it
// elsewhere, so they are listed in every namespace; a caller allowed only its
// own namespace gets those the observer puts there by default (the object's
// namespace, a Namespace's own, the system namespace for other
// cluster-scoped objects). The object's uid, not its name, picks them: a
// view of an earlier object of the same name is not this object's.
func (o *options) views(ctx context.Context, c client.Client, obj *metav1.PartialObjectMetadata) ([]quotav1alpha1.ResourceClaim, error) {
	var claims quotav1alpha1.ResourceClaimList
	isView := client.MatchingLabels{quotav1alpha1.ViewLabel: "true"}
	err := c.List(ctx, &claims, isView)
	if apierrors.IsForbidden(err) {
		err = c.List(ctx, &claims, isView, client.InNamespace(o.defaultViewNamespace(obj)))
	}
	if err != nil {
		return nil, err
	}
	var out []quotav1alpha1.ResourceClaim
	for _, v := range claims.Items {
		if r := v.Spec.ResourceRef; r != nil && r.UID == string(obj.UID) {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

func (o *options) defaultViewNamespace(obj *metav1.PartialObjectMetadata) string {
	switch {
	case obj.Namespace != "":
		return obj.Namespace
	case obj.Kind == "Namespace" && obj.GroupVersionKind().Group == "":
		return obj.Name
	default:
		return o.systemNamespace
	}
}

// bucketName is the bucket the observer recorded for the request in the
// view's status, else the name the ledger gives that consumer, resource type
// and dimensions (bucket names are deterministic).
func bucketName(v quotav1alpha1.ResourceClaim, c quotav1alpha1.ConsumerRef, req quotav1alpha1.ResourceRequest) string {
	for _, a := range v.Status.Allocations {
		if a.ResourceType == req.ResourceType && a.AllocatingBucket != "" {
			return a.AllocatingBucket
		}
	}
	consumer := ledger.Consumer{APIGroup: c.APIGroup, Kind: c.Kind, Name: c.Name, Namespace: c.Namespace}
	return ledger.NewBucketKey(consumer, req.ResourceType, req.Dimensions).Name()
}

// bucketFigures returns a lookup of a bucket's figures: the bucket itself
// when the caller may read it, else the copy in an EffectiveResourceGrant of
// the object's namespace (which a tenant may read), else nil. The rows
// `usage` shows for that namespace already hold both, read once.
func (o *options) bucketFigures(ctx context.Context, c client.Client, obj *metav1.PartialObjectMetadata) (func(context.Context, bucketRef) (*usage.Row, error), error) {
	copies := map[bucketRef]usage.Row{}
	if ns := o.defaultViewNamespace(obj); ns != "" {
		rows, err := usage.NamespaceRows(ctx, c, ns)
		if err != nil && !apierrors.IsForbidden(err) {
			return nil, err
		}
		for _, r := range rows {
			copies[bucketRef{Namespace: r.BucketNamespace, Name: r.Bucket}] = r
		}
	}
	buckets := usage.NewBucketReader(c)
	return func(ctx context.Context, ref bucketRef) (*usage.Row, error) {
		if r, ok := copies[ref]; ok {
			return &r, nil
		}
		b, err := buckets.Get(ctx, ref.Namespace, ref.Name)
		if b == nil || err != nil {
			return nil, err
		}
		r := usage.RowOfBucket(b)
		return &r, nil
	}, nil
}

var explainColumns = []metav1.TableColumnDefinition{
	{Name: "View", Type: "string", Priority: 1},
	{Name: "Consumer Kind", Type: "string"},
	{Name: "Consumer", Type: "string"},
	{Name: "Resource Type", Type: "string"},
	{Name: "Dimensions", Type: "string"},
	{Name: "Amount", Type: "string"},
	{Name: "Used", Type: "string"},
	{Name: "Reserved", Type: "string"},
	{Name: "Limit", Type: "string"},
	{Name: "Available", Type: "string"},
	{Name: "Bucket", Type: "string"},
}

// explainTable: the bucket's figures include what the object counts (used,
// or reserved while it is not yet counted).
func explainTable(rows []explainRow, wide bool) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: explainColumns}
	for _, r := range rows {
		cells := []any{
			r.View, r.Consumer.Kind, usage.ConsumerName(r.Consumer), r.ResourceType, usage.Dimensions(r.Dimensions),
			usage.Amount(r.Unit, r.Amount, wide),
		}
		if b := r.Bucket; b != nil {
			cells = append(cells, usage.Amount(r.Unit, b.Used, wide), usage.Amount(r.Unit, b.Reserved, wide),
				usage.Amount(r.Unit, b.Limit, wide), usage.Amount(r.Unit, b.Available, wide))
		} else {
			cells = append(cells, "<unknown>", "<unknown>", "<unknown>", "<unknown>")
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: append(cells, r.BucketRef.Namespace+"/"+r.BucketRef.Name)})
	}
	return t
}
