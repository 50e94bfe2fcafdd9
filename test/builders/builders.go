// Package builders makes quotakeeper's API objects for tests with fluent
// wrappers, in the style of Kueue's pkg/util/testing:
//
//	builders.Grant("acme-compute", ns).Consumer(acme).Allowance("compute/cpu", 1000).Obj()
//
// Each constructor fills only what every object of its kind needs; each method
// sets one thing and returns the wrapper; Obj returns the object. Every kind
// of api/v1alpha1 has one: Registration, Grant, Claim, Bucket
// (AllowanceBucket), EffectiveGrant, GrantPolicy, ClaimPolicy and Bypass
// (QuotaBypass), and Namespace for the tenants' namespaces. A struct literal
// stays where it says more: an object named only to be read or deleted, a
// copy of another's spec, a projection of a read object for comparison. The package
// is separate so that unit, envtest and end-to-end tests build objects one way
// (instead of a grant() helper per package, each with its own signature). It
// builds API objects only: it imports api/v1alpha1 and apimachinery, never the
// engine or a store, so any test may use it without an import cycle. Values
// of the engine (ledger.Grant and friends) are one-line struct literals and
// stay beside the tests that use them.
package builders

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// Allowance is an allowance of resourceType with one bucket per amount, each
// bucket applying to every dimension.
func Allowance(resourceType string, amounts ...int64) quotav1alpha1.Allowance {
	return SelectedAllowance(resourceType, nil, amounts...)
}

// SelectedAllowance is an allowance of resourceType with one bucket per
// amount, each bucket limited to the dimensions sel selects (nil: every one).
func SelectedAllowance(resourceType string, sel *metav1.LabelSelector, amounts ...int64) quotav1alpha1.Allowance {
	a := quotav1alpha1.Allowance{ResourceType: resourceType}
	for _, n := range amounts {
		a.Buckets = append(a.Buckets, quotav1alpha1.GrantBucket{Amount: n, DimensionSelector: sel})
	}
	return a
}

// Request is a claim's request for amount of resourceType in dims.
func Request(resourceType string, amount int64, dims map[string]string) quotav1alpha1.ResourceRequest {
	return quotav1alpha1.ResourceRequest{ResourceType: resourceType, Amount: amount, Dimensions: dims}
}

// condition is a condition of type typ with status, observed at generation.
func condition(typ string, status metav1.ConditionStatus, generation int64, reason, message string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, ObservedGeneration: generation, Reason: reason, Message: message}
}

// GrantWrapper builds a ResourceGrant.
type GrantWrapper struct{ quotav1alpha1.ResourceGrant }

// Grant starts a ResourceGrant named name in namespace.
func Grant(name, namespace string) *GrantWrapper {
	return &GrantWrapper{quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}}
}

// Obj returns the grant.
func (w *GrantWrapper) Obj() *quotav1alpha1.ResourceGrant { return &w.ResourceGrant }

// Consumer sets the consumer the grant gives to.
func (w *GrantWrapper) Consumer(ref quotav1alpha1.ConsumerRef) *GrantWrapper {
	w.Spec.ConsumerRef = ref
	return w
}

// Generation sets metadata.generation, as the apiserver would have.
func (w *GrantWrapper) Generation(g int64) *GrantWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// Allowance appends an allowance of resourceType with one bucket per amount.
func (w *GrantWrapper) Allowance(resourceType string, amounts ...int64) *GrantWrapper {
	return w.Allowances(Allowance(resourceType, amounts...))
}

// SelectedAllowance appends an allowance of resourceType with one bucket per
// amount, each limited to the dimensions sel selects.
func (w *GrantWrapper) SelectedAllowance(resourceType string, sel *metav1.LabelSelector, amounts ...int64) *GrantWrapper {
	return w.Allowances(SelectedAllowance(resourceType, sel, amounts...))
}

// Allowances appends allowances as given.
func (w *GrantWrapper) Allowances(a ...quotav1alpha1.Allowance) *GrantWrapper {
	w.Spec.Allowances = append(w.Spec.Allowances, a...)
	return w
}

// Condition sets a status condition observed at the grant's generation.
func (w *GrantWrapper) Condition(typ string, status metav1.ConditionStatus, reason string) *GrantWrapper {
	w.Status.Conditions = append(w.Status.Conditions, condition(typ, status, w.ObjectMeta.Generation, reason, ""))
	return w
}

// RegistrationWrapper builds a ResourceRegistration.
type RegistrationWrapper struct {
	quotav1alpha1.ResourceRegistration
}

// Registration starts a ResourceRegistration named name of resourceType.
func Registration(name, resourceType string) *RegistrationWrapper {
	return &RegistrationWrapper{quotav1alpha1.ResourceRegistration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       quotav1alpha1.ResourceRegistrationSpec{ResourceType: resourceType},
	}}
}

// Obj returns the registration.
func (w *RegistrationWrapper) Obj() *quotav1alpha1.ResourceRegistration {
	return &w.ResourceRegistration
}

// Consumer sets the type of consumer that consumes the resource type.
func (w *RegistrationWrapper) Consumer(ref quotav1alpha1.ConsumerTypeRef) *RegistrationWrapper {
	w.Spec.ConsumerTypeRef = ref
	return w
}

// Type sets how the resource type is counted (allocation or entity).
func (w *RegistrationWrapper) Type(t quotav1alpha1.RegistrationType) *RegistrationWrapper {
	w.Spec.Type = t
	return w
}

// BaseUnit sets the unit amounts are counted in.
func (w *RegistrationWrapper) BaseUnit(unit string) *RegistrationWrapper {
	w.Spec.BaseUnit = unit
	return w
}

// DisplayUnit sets the unit amounts are shown in, factor base units to one.
func (w *RegistrationWrapper) DisplayUnit(unit string, factor int64) *RegistrationWrapper {
	w.Spec.DisplayUnit, w.Spec.UnitConversionFactor = unit, factor
	return w
}

// Dimensions sets the dimension keys buckets are split by.
func (w *RegistrationWrapper) Dimensions(keys ...string) *RegistrationWrapper {
	w.Spec.Dimensions = keys
	return w
}

// ClaimingResources sets the kinds whose creation claims the resource type.
func (w *RegistrationWrapper) ClaimingResources(gks ...quotav1alpha1.GroupKind) *RegistrationWrapper {
	w.Spec.ClaimingResources = gks
	return w
}

// Generation sets metadata.generation, as the apiserver would have.
func (w *RegistrationWrapper) Generation(g int64) *RegistrationWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// Condition sets a status condition observed at generation.
func (w *RegistrationWrapper) Condition(typ string, status metav1.ConditionStatus, generation int64, message string) *RegistrationWrapper {
	w.Status.Conditions = append(w.Status.Conditions, condition(typ, status, generation, "", message))
	return w
}

// Deleting marks the registration as being deleted since at.
func (w *RegistrationWrapper) Deleting(at time.Time) *RegistrationWrapper {
	w.DeletionTimestamp = &metav1.Time{Time: at}
	return w
}

// ClaimWrapper builds a ResourceClaim.
type ClaimWrapper struct{ quotav1alpha1.ResourceClaim }

// Claim starts a ResourceClaim named name in namespace.
func Claim(name, namespace string) *ClaimWrapper {
	return &ClaimWrapper{quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}}
}

// Obj returns the claim.
func (w *ClaimWrapper) Obj() *quotav1alpha1.ResourceClaim { return &w.ResourceClaim }

// Consumer sets the consumer the claim is charged to.
func (w *ClaimWrapper) Consumer(ref quotav1alpha1.ConsumerRef) *ClaimWrapper {
	w.Spec.ConsumerRef = ref
	return w
}

// Request appends a request for amount of resourceType in dims.
func (w *ClaimWrapper) Request(resourceType string, amount int64, dims map[string]string) *ClaimWrapper {
	return w.Requests(Request(resourceType, amount, dims))
}

// Requests appends requests as given.
func (w *ClaimWrapper) Requests(reqs ...quotav1alpha1.ResourceRequest) *ClaimWrapper {
	w.Spec.Requests = append(w.Spec.Requests, reqs...)
	return w
}

// NamespaceWrapper builds a Namespace.
type NamespaceWrapper struct{ corev1.Namespace }

// Namespace starts a Namespace named name.
func Namespace(name string) *NamespaceWrapper {
	return &NamespaceWrapper{corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// Obj returns the namespace.
func (w *NamespaceWrapper) Obj() *corev1.Namespace { return &w.Namespace }

// Label sets one label.
func (w *NamespaceWrapper) Label(key, value string) *NamespaceWrapper {
	setLabel(&w.ObjectMeta, key, value)
	return w
}

// Labels sets every label in labels.
func (w *NamespaceWrapper) Labels(labels map[string]string) *NamespaceWrapper {
	for k, v := range labels {
		w.Label(k, v)
	}
	return w
}

// setLabel sets one label of md.
func setLabel(md *metav1.ObjectMeta, key, value string) {
	if md.Labels == nil {
		md.Labels = map[string]string{}
	}
	md.Labels[key] = value
}

// setAnnotation sets one annotation of md.
func setAnnotation(md *metav1.ObjectMeta, key, value string) {
	if md.Annotations == nil {
		md.Annotations = map[string]string{}
	}
	md.Annotations[key] = value
}

// Labels sets every label in labels.
func (w *GrantWrapper) Labels(labels map[string]string) *GrantWrapper {
	for k, v := range labels {
		setLabel(&w.ObjectMeta, k, v)
	}
	return w
}

// Annotations sets every annotation in annotations.
func (w *GrantWrapper) Annotations(annotations map[string]string) *GrantWrapper {
	for k, v := range annotations {
		setAnnotation(&w.ObjectMeta, k, v)
	}
	return w
}

// OwnedBy appends an owner reference.
func (w *GrantWrapper) OwnedBy(ref metav1.OwnerReference) *GrantWrapper {
	w.OwnerReferences = append(w.OwnerReferences, ref)
	return w
}

// Finalizer adds a finalizer, as a test holding the registration being
// deleted does.
func (w *RegistrationWrapper) Finalizer(f string) *RegistrationWrapper {
	w.Finalizers = append(w.Finalizers, f)
	return w
}

// Created sets metadata.creationTimestamp, as the apiserver would have.
func (w *RegistrationWrapper) Created(at time.Time) *RegistrationWrapper {
	w.CreationTimestamp = metav1.NewTime(at)
	return w
}

// Label sets one label.
func (w *ClaimWrapper) Label(key, value string) *ClaimWrapper {
	setLabel(&w.ObjectMeta, key, value)
	return w
}

// Labels sets every label in labels.
func (w *ClaimWrapper) Labels(labels map[string]string) *ClaimWrapper {
	for k, v := range labels {
		w.Label(k, v)
	}
	return w
}

// Annotations sets every annotation in annotations.
func (w *ClaimWrapper) Annotations(annotations map[string]string) *ClaimWrapper {
	for k, v := range annotations {
		setAnnotation(&w.ObjectMeta, k, v)
	}
	return w
}

// View labels the claim a view, as the observer writes one.
func (w *ClaimWrapper) View() *ClaimWrapper { return w.Label(quotav1alpha1.ViewLabel, "true") }

// OwnedBy appends an owner reference.
func (w *ClaimWrapper) OwnedBy(ref metav1.OwnerReference) *ClaimWrapper {
	w.OwnerReferences = append(w.OwnerReferences, ref)
	return w
}

// For sets spec.resourceRef, the object the claim is for.
func (w *ClaimWrapper) For(ref quotav1alpha1.ObjectRef) *ClaimWrapper {
	w.Spec.ResourceRef = &ref
	return w
}

// UID sets metadata.uid, as the apiserver would have.
func (w *ClaimWrapper) UID(uid types.UID) *ClaimWrapper {
	w.ObjectMeta.UID = uid
	return w
}

// Generation sets metadata.generation, as the apiserver would have.
func (w *ClaimWrapper) Generation(g int64) *ClaimWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// Status sets the status as given.
func (w *ClaimWrapper) Status(st quotav1alpha1.ResourceClaimStatus) *ClaimWrapper {
	w.ResourceClaim.Status = st
	return w
}

// DelegatedFrom makes the grant a delegated one, drawing from parent's cap.
func (w *GrantWrapper) DelegatedFrom(parent quotav1alpha1.ConsumerRef) *GrantWrapper {
	w.Spec.DelegatedFrom = &quotav1alpha1.DelegatedFrom{ConsumerRef: parent}
	return w
}
