package usage

import (
	"context"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// Row is one bucket's figures, in base units as the API holds them; the
// unit says how to show them. It is also what -o json and -o yaml print.
type Row struct {
	Consumer        quotav1alpha1.ConsumerRef `json:"consumer"`
	ResourceType    string                    `json:"resourceType"`
	Dimensions      map[string]string         `json:"dimensions,omitempty"`
	Bucket          string                    `json:"bucket"`
	BucketNamespace string                    `json:"bucketNamespace"`
	Unit            quotav1alpha1.Units       `json:"unit"`
	Used            int64                     `json:"used"`
	Reserved        int64                     `json:"reserved"`
	Limit           int64                     `json:"limit"`
	Available       int64                     `json:"available"`
	// Namespaces is what each namespace's objects use of a bucket; absent
	// when the bucket itself could not be read (a tenant reading an
	// organization's figures through its EffectiveResourceGrant).
	Namespaces []quotav1alpha1.NamespaceUsage `json:"namespaces,omitempty"`
}

// RowOfBucket is a bucket's own figures.
func RowOfBucket(b *quotav1alpha1.AllowanceBucket) Row {
	return Row{
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

// ClusterRows is every bucket in the cluster.
func ClusterRows(ctx context.Context, c client.Client) ([]Row, error) {
	var buckets quotav1alpha1.AllowanceBucketList
	if err := c.List(ctx, &buckets); err != nil {
		return nil, err
	}
	rows := make([]Row, 0, len(buckets.Items))
	for i := range buckets.Items {
		rows = append(rows, RowOfBucket(&buckets.Items[i]))
	}
	sortRows(rows)
	return rows, nil
}

// NamespaceRows is the buckets of every consumer that applies to the
// namespace. The namespace's EffectiveResourceGrants say which those are:
// the effective controller keeps one per consumer and resource type in
// every namespace that belongs to the consumer (v1alpha1.NamespaceBelongsTo),
// and a tenant may read them, whereas an organization's buckets live in the
// system namespace, which tenants cannot read. The bucket's own status is
// the source of truth, so it is read when allowed; otherwise the copy in the
// EffectiveResourceGrant is shown. Each row takes its units from the
// EffectiveResourceGrant too: the tenant need not read the registration.
func NamespaceRows(ctx context.Context, c client.Client, ns string) ([]Row, error) {
	var ergs quotav1alpha1.EffectiveResourceGrantList
	if err := c.List(ctx, &ergs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	buckets := NewBucketReader(c)
	var rows []Row
	for _, e := range ergs.Items {
		var units quotav1alpha1.Units
		if e.Status.Units != nil {
			units = *e.Status.Units
		}
		for _, ref := range e.Status.AllowanceBucketRefs {
			b, err := buckets.Get(ctx, ref.Namespace, ref.Name)
			if err != nil {
				return nil, err
			}
			if b != nil {
				row := RowOfBucket(b)
				row.Unit = units
				rows = append(rows, row)
				continue
			}
			rows = append(rows, Row{
				Unit:            units,
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

// BucketReader reads buckets once each, and reports one the caller may not
// read (or that is gone) as nil rather than as an error: the caller has
// another copy of the figures.
type BucketReader struct {
	c    client.Client
	seen map[client.ObjectKey]*quotav1alpha1.AllowanceBucket
}

// NewBucketReader reads buckets with c.
func NewBucketReader(c client.Client) *BucketReader { return &BucketReader{c: c} }

// Get returns the bucket, or nil when the caller may not read it or it is gone.
func (r *BucketReader) Get(ctx context.Context, ns, name string) (*quotav1alpha1.AllowanceBucket, error) {
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

// WithUnits sets the unit of each row that has none (NamespaceRows sets
// them from the EffectiveResourceGrants) from its resource type's
// registration. When every row has its unit, registrations are not read.
func WithUnits(ctx context.Context, c client.Client, rows []Row) error {
	var us map[string]quotav1alpha1.Units
	for i := range rows {
		if rows[i].Unit != (quotav1alpha1.Units{}) {
			continue
		}
		if us == nil {
			var err error
			if us, err = Units(ctx, c); err != nil {
				return err
			}
		}
		rows[i].Unit = us[rows[i].ResourceType]
	}
	return nil
}

func sortRows(rows []Row) {
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		ka := []string{a.Consumer.Kind, a.Consumer.Namespace, a.Consumer.Name, a.ResourceType, Dimensions(a.Dimensions)}
		kb := []string{b.Consumer.Kind, b.Consumer.Namespace, b.Consumer.Name, b.ResourceType, Dimensions(b.Dimensions)}
		for k := range ka {
			if ka[k] != kb[k] {
				return ka[k] < kb[k]
			}
		}
		return false
	})
}

// Dimensions shows a dimension set as a label selector does, sorted:
// "region=dfw,tier=gold"; none as kubectl shows an empty field.
func Dimensions(d map[string]string) string {
	if len(d) == 0 {
		return "<none>"
	}
	return labels.Set(d).String()
}

// ConsumerName is a consumer's name, with its namespace when it has one.
func ConsumerName(c quotav1alpha1.ConsumerRef) string {
	if c.Namespace != "" {
		return c.Namespace + "/" + c.Name
	}
	return c.Name
}
