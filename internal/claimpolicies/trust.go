package claimpolicies

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/validation"
)

// Namespace is the namespace of the object a policy renders a claim for,
// as the evaluation knows it: the object's namespace, or a Namespace
// itself.
type Namespace struct {
	// Name is "" for a cluster-scoped object other than a Namespace.
	Name string
	// Labels are the namespace's labels, when Known. Unknown labels (the
	// evaluation could not find the namespace) count as none, so a
	// consumer named by a namespace label is refused, saying why.
	Labels map[string]string
	Known  bool
}

// templatePath is where a policy's claim template is written.
var templatePath = field.NewPath("spec", "target", "resourceClaimTemplate")

// judge holds a rendered claim to the boundary a ResourceClaim is held to
// (validation.ClaimConsumer, the claim webhook's own check): the claim is
// made in the object's namespace, by whoever may write objects there, and
// that namespace must belong to the consumer it names. The consumer and the
// claim's namespace are rendered from the object, which the tenant writes:
// without this, a tenant of team-a could charge team-b's quota by setting
// the field a policy reads its consumer from.
//
// A cluster-scoped object other than a Namespace is in no namespace: no
// tenant boundary holds it, and the policy's conditions decide whom it may
// charge (docs/policies.md).
func (s *Set) judge(c *quotav1alpha1.ResourceClaim, ns Namespace) *field.Error {
	if ns.Name == "" {
		return nil
	}
	if c.Namespace != "" && c.Namespace != ns.Name {
		return field.Forbidden(templatePath.Child("metadata", "namespace"),
			fmt.Sprintf("rendered %q for an object in namespace %q: a policy's claim is made in its object's namespace", c.Namespace, ns.Name))
	}
	err := validation.ClaimConsumer(templatePath.Child("spec", "consumerRef"), ns.Name, ns.Labels, c.Spec.ConsumerRef, s.systemNamespace())
	if err != nil && !ns.Known && !c.Spec.ConsumerRef.IsNamespace() {
		err.Detail += fmt.Sprintf(" (the labels of namespace %q are unknown here: sync v1 Namespace)", ns.Name)
	}
	return err
}

// SetSystemNamespace says where the buckets of consumers that are neither
// a namespace nor inside one live (default
// v1alpha1.DefaultSystemNamespace): an object there may name them, as a
// claim there may.
func (s *Set) SetSystemNamespace(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sysNamespace = ns
}

func (s *Set) systemNamespace() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.sysNamespace == "" {
		return quotav1alpha1.DefaultSystemNamespace
	}
	return s.sysNamespace
}
