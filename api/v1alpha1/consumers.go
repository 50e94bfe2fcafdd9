package v1alpha1

// DefaultSystemNamespace holds the buckets (and so the grants) of consumers
// that are neither a namespace nor inside one (an Organization, say).
const DefaultSystemNamespace = "quotakeeper-system"

// IsNamespace reports whether the consumer is a Namespace (core group): a
// namespace is its own consumer.
func (c ConsumerRef) IsNamespace() bool {
	return c.APIGroup == "" && c.Kind == "Namespace"
}

// BucketNamespace is where the consumer's buckets, and the grants that feed
// them, live: a namespace consumer's own namespace, a namespaced consumer's
// namespace, else systemNamespace. RBAC on that namespace decides who may
// grant the consumer quota.
func BucketNamespace(c ConsumerRef, systemNamespace string) string {
	switch {
	case c.IsNamespace():
		return c.Name
	case c.Namespace != "":
		return c.Namespace
	default:
		return systemNamespace
	}
}
