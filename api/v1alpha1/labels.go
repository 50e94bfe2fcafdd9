package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// LabelPrefix is the prefix of quotakeeper's own labels and annotations.
const LabelPrefix = "quota.miloapis.com"

// ConsumerLabelKey is the namespace label that names a namespace's consumer
// of the given kind: a namespace labelled
// resourcemanager.miloapis.com/organization=acme belongs to Organization acme.
// Namespaces with the same label value share that consumer's quota. The key is
// the kind's API group (quota.miloapis.com for the core group) and the kind
// in lower case.
func ConsumerLabelKey(apiGroup, kind string) string {
	if apiGroup == "" {
		apiGroup = LabelPrefix
	}
	return apiGroup + "/" + strings.ToLower(kind)
}

// KubernetesReservedLabel reports whether a label key lies in the domains
// Kubernetes reserves for its own components (kubernetes.io and k8s.io and
// their subdomains: kubernetes.io/metadata.name, pod-security.kubernetes.io/
// enforce, app.kubernetes.io/name). No consumer label may: the namespace
// guard's webhook and Gatekeeper's shipped values send a namespace write to
// admission only when a label outside these domains is set or changes
// (matchConditions, config/webhook and config/gatekeeper), so namespaces that
// carry only such labels can be created while quotakeeper or Gatekeeper is
// down. The CEL there is this function's twin:
// !k.matches("^([a-z0-9.-]*[.])?(kubernetes|k8s)[.]io/").
func KubernetesReservedLabel(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, domain := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == domain || strings.HasSuffix(prefix, "."+domain) {
			return true
		}
	}
	return false
}

// NamespaceBelongsTo reports whether a namespace with the given name and
// labels belongs to the consumer: it is the consumer (kind Namespace in the
// core group), or it carries the consumer's label with the consumer's name.
func NamespaceBelongsTo(namespace string, labels map[string]string, c ConsumerRef) bool {
	if c.IsNamespace() {
		return c.Name == namespace
	}
	return labels[ConsumerLabelKey(c.APIGroup, c.Kind)] == c.Name
}

// Labels every AllowanceBucket carries, as Milo's buckets do, so that a
// consumer's buckets can be listed with a label selector.
const (
	LabelConsumerKind = LabelPrefix + "/consumer-kind"
	LabelConsumerName = LabelPrefix + "/consumer-name"
)

// BucketLabels are the labels of a bucket of consumer c: its kind and name.
// A value that cannot be a label value (a name longer than 63 characters)
// is left out: the bucket must still be created, and its spec.consumerRef
// names the consumer in full.
func BucketLabels(c ConsumerRef) map[string]string {
	out := map[string]string{}
	for k, v := range map[string]string{LabelConsumerKind: c.Kind, LabelConsumerName: c.Name} {
		if len(validation.IsValidLabelValue(v)) == 0 {
			out[k] = v
		}
	}
	return out
}

// What a ResourceGrant created by a GrantCreationPolicy carries, so the
// policy's controller finds its grants again, and a reader sees where a grant
// came from.
const (
	// LabelPolicy names the GrantCreationPolicy (Milo's label).
	LabelPolicy = LabelPrefix + "/policy"
	// LabelTriggerUID is the uid of the object the grant was made for.
	LabelTriggerUID = LabelPrefix + "/trigger-uid"
	// AnnotationTrigger is that object's namespace/name, or its name when it
	// is cluster-scoped; its kind is the policy's trigger kind.
	AnnotationTrigger = LabelPrefix + "/trigger"
)
