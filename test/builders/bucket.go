package builders

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// BucketWrapper builds an AllowanceBucket. Its name is the ledger's
// (ledger.BucketKey.Name), which the caller works out: this package does not
// import the engine.
type BucketWrapper struct{ quotav1alpha1.AllowanceBucket }

// Bucket starts an AllowanceBucket named name in namespace.
func Bucket(name, namespace string) *BucketWrapper {
	return &BucketWrapper{quotav1alpha1.AllowanceBucket{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}}
}

// Obj returns the bucket.
func (w *BucketWrapper) Obj() *quotav1alpha1.AllowanceBucket { return &w.AllowanceBucket }

// Of sets the consumer and resource type the bucket counts, and the
// consumer's labels, as the ledger writes them.
func (w *BucketWrapper) Of(c quotav1alpha1.ConsumerRef, resourceType string) *BucketWrapper {
	w.Spec.ConsumerRef, w.Spec.ResourceType = c, resourceType
	w.Labels = quotav1alpha1.BucketLabels(c)
	return w
}

// Dimensions sets the dimension values the bucket counts (nil: none).
func (w *BucketWrapper) Dimensions(dims map[string]string) *BucketWrapper {
	w.Spec.Dimensions = dims
	return w
}

// Usage sets the status figures.
func (w *BucketWrapper) Usage(limit, allocated, reserved, available int64) *BucketWrapper {
	st := &w.Status
	st.Limit, st.Allocated, st.Reserved, st.Available = limit, allocated, reserved, available
	return w
}

// NamespaceUsage appends the allocated amount counted in namespace.
func (w *BucketWrapper) NamespaceUsage(namespace string, allocated int64) *BucketWrapper {
	w.Status.Namespaces = append(w.Status.Namespaces, quotav1alpha1.NamespaceUsage{Namespace: namespace, Allocated: allocated})
	return w
}

// EffectiveGrantWrapper builds an EffectiveResourceGrant.
type EffectiveGrantWrapper struct {
	quotav1alpha1.EffectiveResourceGrant
}

// EffectiveGrant starts an EffectiveResourceGrant named name in namespace,
// of consumer c's resourceType.
func EffectiveGrant(name, namespace string, c quotav1alpha1.ConsumerRef, resourceType string) *EffectiveGrantWrapper {
	return &EffectiveGrantWrapper{quotav1alpha1.EffectiveResourceGrant{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       quotav1alpha1.EffectiveResourceGrantSpec{ConsumerRef: c, ResourceType: resourceType},
	}}
}

// Obj returns the effective grant.
func (w *EffectiveGrantWrapper) Obj() *quotav1alpha1.EffectiveResourceGrant {
	return &w.EffectiveResourceGrant
}

// Units sets the units the totals are shown in.
func (w *EffectiveGrantWrapper) Units(u quotav1alpha1.Units) *EffectiveGrantWrapper {
	w.Status.Units = &u
	return w
}

// Bucket adds b to the buckets the grant shows, and its figures to the
// totals, as the effective grant controller sums them.
func (w *EffectiveGrantWrapper) Bucket(b *quotav1alpha1.AllowanceBucket) *EffectiveGrantWrapper {
	s, st := b.Status, &w.Status
	st.TotalLimit += s.Limit
	st.TotalAllocated += s.Allocated
	st.TotalReserved += s.Reserved
	st.Available += s.Available
	st.AllowanceBucketRefs = append(st.AllowanceBucketRefs, quotav1alpha1.BucketRef{
		Name: b.Name, Namespace: b.Namespace, Dimensions: b.Spec.Dimensions,
		Limit: s.Limit, Allocated: s.Allocated, Reserved: s.Reserved, Available: s.Available,
	})
	return w
}

// ContributingGrant appends a grant that gives the bucket amount.
func (w *BucketWrapper) ContributingGrant(name string, amount int64) *BucketWrapper {
	w.Status.ContributingGrantRefs = append(w.Status.ContributingGrantRefs, quotav1alpha1.ContributingGrantRef{Name: name, Amount: amount})
	return w
}
