package validation

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// Verdict is the outcome of judging a grant or claim against the
// registrations. Errors make it invalid. Pending lists registrations that
// exist but have not been judged yet: a webhook admits the object with a
// warning (a registration and its first grant are often applied together),
// and a controller waits for the registration before deciding.
type Verdict struct {
	Errors  field.ErrorList
	Pending []string
}

// ValidateRegistration checks what the CRD schema cannot: dimensions are
// label keys, because grants select on them with label selectors and claims
// set them as labels.
func ValidateRegistration(r *quotav1alpha1.ResourceRegistration) field.ErrorList {
	var errs field.ErrorList
	// A consumer label in Kubernetes' reserved domains would never reach the
	// namespace guard (quotav1alpha1.KubernetesReservedLabel), so anyone who
	// may label a namespace could move it between consumers.
	if c := r.Spec.ConsumerTypeRef; c.APIGroup != "" || c.Kind != "Namespace" {
		if key := quotav1alpha1.ConsumerLabelKey(c.APIGroup, c.Kind); quotav1alpha1.KubernetesReservedLabel(key) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "consumerTypeRef", "apiGroup"), c.APIGroup,
				fmt.Sprintf("the consumer label %s would lie in a domain Kubernetes reserves (kubernetes.io, k8s.io), which the namespace guard does not see; a consumer kind needs an API group of its own", key)))
		}
	}
	for i, d := range r.Spec.Dimensions {
		if msg := ledger.DimensionKeyError(d); msg != "" {
			errs = append(errs, field.Invalid(field.NewPath("spec", "dimensions").Index(i), d, msg))
		}
	}
	if _, ok := quotav1alpha1.DelegatedBase(r.Spec.ResourceType); ok {
		errs = append(errs, field.Invalid(field.NewPath("spec", "resourceType"), r.Spec.ResourceType,
			"the prefix \"delegated/\" names the buckets that count a parent's hand-outs; a registered resource type cannot use it"))
	}
	return errs
}

// ValidateGrant judges a grant: it lives where its consumer's buckets live
// (so RBAC on that namespace decides who may grant), every resource type has
// an active registration for this consumer kind, selectors are well formed
// and select only declared dimensions, and an allowance's amounts do not sum
// past int64. An allowance of a delegation resource type is a cap to hand
// out (validateCap). What a delegated grant must be besides is
// ValidateDelegation's.
func ValidateGrant(g *quotav1alpha1.ResourceGrant, cat *Catalog, systemNamespace string) Verdict {
	var v Verdict
	consumer := g.Spec.ConsumerRef
	if want := quotav1alpha1.BucketNamespace(consumer, systemNamespace); g.Namespace != want {
		v.Errors = append(v.Errors, field.Invalid(field.NewPath("metadata", "namespace"), g.Namespace,
			fmt.Sprintf("grants for %s live in namespace %q, with its buckets", consumerString(consumer), want)))
	}
	for i, a := range g.Spec.Allowances {
		path := field.NewPath("spec", "allowances").Index(i)
		var reg *quotav1alpha1.ResourceRegistration
		base, isCap := quotav1alpha1.DelegatedBase(a.ResourceType)
		if isCap {
			v.Errors = append(v.Errors, validateCap(g, cat, base, a, path)...)
		} else {
			reg = v.registration(cat, a.ResourceType, path.Child("resourceType"), consumerType(consumer), consumerPath)
		}
		var sum int64
		overflowed := false
		for j, b := range a.Buckets {
			bpath := path.Child("buckets").Index(j)
			var ok bool
			if sum, ok = add(sum, b.Amount); !ok && !overflowed {
				overflowed = true
				v.Errors = append(v.Errors, field.Invalid(bpath.Child("amount"), b.Amount,
					fmt.Sprintf("the amounts of %s in this grant sum past the int64 maximum %d", a.ResourceType, int64(math.MaxInt64))))
			}
			if !isCap {
				v.Errors = append(v.Errors, selectorErrors(b.DimensionSelector, reg, bpath.Child("dimensionSelector"))...)
			}
		}
	}
	return v
}

// ValidateGrantTotals checks that a grant does not, together with the other
// grants of the same consumer, push a limit past int64: the ledger would
// refuse to compute it, failing every claim of that consumer. Every amount
// counts whatever its selector, which errs on the side of refusing.
func ValidateGrantTotals(g *quotav1alpha1.ResourceGrant, others []quotav1alpha1.ResourceGrant) field.ErrorList {
	var errs field.ErrorList
	for i, a := range g.Spec.Allowances {
		var total int64
		ok := true
		for _, b := range a.Buckets {
			total, ok = add(total, b.Amount)
			if !ok {
				break // reported by ValidateGrant
			}
		}
		for k := 0; ok && k < len(others); k++ {
			o := &others[k]
			if o.Name == g.Name || o.Spec.ConsumerRef != g.Spec.ConsumerRef {
				continue
			}
			for _, oa := range o.Spec.Allowances {
				for _, b := range oa.Buckets {
					if ok && oa.ResourceType == a.ResourceType {
						if total, ok = add(total, b.Amount); !ok {
							errs = append(errs, field.Invalid(field.NewPath("spec", "allowances").Index(i), a.ResourceType,
								fmt.Sprintf("with the other grants for %s (such as %q), the amounts of %s sum past the int64 maximum %d",
									consumerString(g.Spec.ConsumerRef), o.Name, a.ResourceType, int64(math.MaxInt64))))
						}
					}
				}
			}
		}
	}
	return errs
}

// ValidateClaim judges a claim: its namespace may claim for the consumer
// (the namespace belongs to it, or is where its buckets live), every
// resource type has an active registration for this consumer kind, and
// dimensions are declared label keys with label values. ns is the claim's
// namespace object, nil if it cannot be found.
func ValidateClaim(c *quotav1alpha1.ResourceClaim, cat *Catalog, ns *corev1.Namespace, systemNamespace string) Verdict {
	var v Verdict
	var labels map[string]string
	if ns != nil {
		labels = ns.Labels
	}
	if err := ClaimConsumer(consumerPath, c.Namespace, labels, c.Spec.ConsumerRef, systemNamespace); err != nil {
		v.Errors = append(v.Errors, err)
	}
	for i, r := range c.Spec.Requests {
		path := field.NewPath("spec", "requests").Index(i)
		reg := v.registration(cat, r.ResourceType, path.Child("resourceType"), consumerType(c.Spec.ConsumerRef), consumerPath)
		for _, k := range slices.Sorted(maps.Keys(r.Dimensions)) {
			dpath := path.Child("dimensions").Key(k)
			if msg := ledger.DimensionKeyError(k); msg != "" {
				v.Errors = append(v.Errors, field.Invalid(dpath, k, "dimension keys are label keys: "+msg))
				continue
			}
			if msg := ledger.DimensionValueError(r.Dimensions[k]); msg != "" {
				v.Errors = append(v.Errors, field.Invalid(dpath, r.Dimensions[k], "dimension values are label values: "+msg))
			}
			if reg != nil && !slices.Contains(reg.Spec.Dimensions, k) {
				v.Errors = append(v.Errors, undeclared(dpath, k, reg))
			}
		}
	}
	return v
}

// ClaimConsumer is the trust boundary between tenants: a claim made in a
// namespace may name consumer, at path, only if the namespace belongs to it
// (v1alpha1.NamespaceBelongsTo: it is the consumer, or carries the
// consumer's label naming it) or is where the consumer's buckets live. It
// returns nil then, else a Forbidden error saying why. labels are the
// namespace's (nil when it cannot be found).
//
// Two kinds of claim are judged by it, and must be judged alike: a
// ResourceClaim an owning service creates (ValidateClaim, in the claim's
// namespace) and the claim a ClaimCreationPolicy renders for an object (in
// the object's namespace, package claimpolicies), whose consumer is rendered
// from fields the tenant writes.
func ClaimConsumer(path *field.Path, namespace string, labels map[string]string, consumer quotav1alpha1.ConsumerRef, systemNamespace string) *field.Error {
	if quotav1alpha1.NamespaceBelongsTo(namespace, labels, consumer) ||
		quotav1alpha1.BucketNamespace(consumer, systemNamespace) == namespace {
		return nil
	}
	if consumer.IsNamespace() {
		return field.Forbidden(path, fmt.Sprintf("a claim in namespace %q may not claim the quota of namespace %q", namespace, consumer.Name))
	}
	return field.Forbidden(path, fmt.Sprintf("namespace %q does not belong to %s: it needs the label %s=%s",
		namespace, consumerString(consumer), quotav1alpha1.ConsumerLabelKey(consumer.APIGroup, consumer.Kind), consumer.Name))
}

// ValidatePolicyResourceType judges a resource type a creation policy's
// template names literally, at path, as a grant's or claim's is judged: it
// has an active registration, for the consumer kind the template names at
// consumerPath (consumer nil when the template computes the kind).
func ValidatePolicyResourceType(cat *Catalog, rt string, path *field.Path, consumer *quotav1alpha1.ConsumerTypeRef, consumerPath *field.Path) Verdict {
	var v Verdict
	v.registration(cat, rt, path, consumer, consumerPath)
	return v
}

// consumerPath is where grants and claims name their consumer.
var consumerPath = field.NewPath("spec", "consumerRef")

func consumerType(c quotav1alpha1.ConsumerRef) *quotav1alpha1.ConsumerTypeRef {
	return &quotav1alpha1.ConsumerTypeRef{APIGroup: c.APIGroup, Kind: c.Kind}
}

// registration resolves a resource type for one allowance or request,
// recording what is wrong with it; it returns the registration whose
// dimensions apply, or nil. A consumer kind, when given, must be the
// registration's.
func (v *Verdict) registration(cat *Catalog, rt string, path *field.Path, consumer *quotav1alpha1.ConsumerTypeRef, consumerPath *field.Path) *quotav1alpha1.ResourceRegistration {
	reg, state := cat.Lookup(rt)
	switch state {
	case Unregistered:
		v.Errors = append(v.Errors, field.Invalid(path, rt, "no ResourceRegistration declares this resource type"))
		return nil
	case Inactive:
		v.Errors = append(v.Errors, field.Invalid(path, rt,
			fmt.Sprintf("ResourceRegistration %q for this resource type is not active: %s", reg.Name, inactiveReason(reg))))
		return nil
	case Pending:
		v.Pending = append(v.Pending, fmt.Sprintf("%s: ResourceRegistration %q for %q has not been judged active yet", path, reg.Name, rt))
	}
	if want := reg.Spec.ConsumerTypeRef; consumer != nil && (want.APIGroup != consumer.APIGroup || want.Kind != consumer.Kind) {
		v.Errors = append(v.Errors, field.Invalid(consumerPath, groupKind(consumer.APIGroup, consumer.Kind),
			fmt.Sprintf("resource type %q is consumed by %s (ResourceRegistration %q)", rt, groupKind(want.APIGroup, want.Kind), reg.Name)))
	}
	return reg
}

// selectorErrors checks a dimension selector's syntax and that it selects
// only dimensions the registration declares.
func selectorErrors(sel *metav1.LabelSelector, reg *quotav1alpha1.ResourceRegistration, path *field.Path) field.ErrorList {
	if sel == nil {
		return nil
	}
	errs := metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path)
	if reg == nil {
		return errs
	}
	for _, k := range slices.Sorted(maps.Keys(sel.MatchLabels)) {
		if !slices.Contains(reg.Spec.Dimensions, k) {
			errs = append(errs, undeclared(path.Child("matchLabels").Key(k), k, reg))
		}
	}
	for i, e := range sel.MatchExpressions {
		if !slices.Contains(reg.Spec.Dimensions, e.Key) {
			errs = append(errs, undeclared(path.Child("matchExpressions").Index(i).Child("key"), e.Key, reg))
		}
	}
	return errs
}

func undeclared(path *field.Path, key string, reg *quotav1alpha1.ResourceRegistration) *field.Error {
	declared := "it declares none"
	if len(reg.Spec.Dimensions) > 0 {
		declared = "it declares " + strings.Join(reg.Spec.Dimensions, ", ")
	}
	return field.Invalid(path, key, fmt.Sprintf("dimension %q is not declared by ResourceRegistration %q (%s)", key, reg.Name, declared))
}

func add(a, b int64) (int64, bool) {
	sum, err := ledger.Add(a, b)
	return sum, err == nil
}

func groupKind(group, kind string) string {
	if group == "" {
		return kind
	}
	return group + "/" + kind
}

func consumerString(c quotav1alpha1.ConsumerRef) string {
	if c.Namespace != "" {
		return fmt.Sprintf("%s %s/%s", groupKind(c.APIGroup, c.Kind), c.Namespace, c.Name)
	}
	return fmt.Sprintf("%s %q", groupKind(c.APIGroup, c.Kind), c.Name)
}
