package observer

// Views: the ResourceClaims the observer writes to show what each live
// object counts (Milo users expect one claim per object). A view is derived
// state: the object is counted, never the view, so deleting one frees
// nothing and the observer writes it again. This file builds them (pure,
// tested without a cluster); viewsync.go writes them.

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/quotakeeper/quotakeeper/api/names"
	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/counting"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// ViewedObject is the object a view shows.
type ViewedObject struct {
	APIVersion, Kind     string
	Namespace, Name, UID string
	// ClusterScoped: the object has no namespace (a namespaced view may
	// then always name it as its owner).
	ClusterScoped bool
}

// viewNames names the views whose claim names none: readable from the
// claim's generateName (or the object's name), unique per object and
// buckets.
var viewNames = names.Scheme{Tag: "quotakeeper.view/v1", Fallback: "claim", PrefixMax: 40, HashBytes: 8}

// Views returns the views of an object from the claims quota.reserve
// recorded while evaluating it: one ResourceClaim per claim and consumer
// (a ResourceClaim names one consumer, and lists each resource type once,
// so a claim asking one consumer for one resource type in two sets of
// dimensions makes two views). Requests for one bucket are summed within a
// claim, as the ledger sums them; two claims making the same view (same
// consumer and buckets: two constraints counting the same thing) make one,
// holding the larger amount per bucket, as the tally counts it (Amounts).
//
// A view is named claim.metadata.name when it is its claim's only view,
// else a stable name prefixed by metadata.generateName, metadata.name or
// the object's name; it lives in metadata.namespace, else the object's
// namespace (a Namespace's own name for a Namespace), else
// systemNamespace. It is owned by the object when Kubernetes allows it: a
// namespaced owner must be in the view's namespace.
func Views(obj ViewedObject, claims []builtins.RecordedClaim, systemNamespace string) []*quotav1alpha1.ResourceClaim {
	// Only claims that asked for a view have one (ClaimMetadata.View): each
	// costs two API writes when first counted, which a platform team that
	// reads usage from the buckets need not pay.
	claims = slices.DeleteFunc(slices.Clone(claims), func(c builtins.RecordedClaim) bool { return !c.Metadata.View })
	// The order quota.reserve was called in is not fixed; the views must be.
	slices.SortStableFunc(claims, func(a, b builtins.RecordedClaim) int { return cmp.Compare(claimOrder(a), claimOrder(b)) })
	var parts []*viewPart
	byIdentity := map[string]*viewPart{}
	for _, rc := range claims {
		mine := splitClaim(rc.Claim)
		for _, p := range mine {
			id := p.identity()
			if have, ok := byIdentity[id]; ok {
				for k, n := range p.amounts {
					have.amounts[k] = max(have.amounts[k], n)
				}
				continue
			}
			p.metadata, p.only = rc.Metadata, len(mine) == 1
			byIdentity[id] = p
			parts = append(parts, p)
		}
	}
	out := make([]*quotav1alpha1.ResourceClaim, 0, len(parts))
	used := map[string]bool{}
	for _, p := range parts {
		v := p.view(obj, systemNamespace)
		if key := v.Namespace + "/" + v.Name; used[key] {
			// Two claims of one object asked for the same name.
			v.Name = p.generatedName(obj)
		}
		used[v.Namespace+"/"+v.Name] = true
		out = append(out, v)
	}
	return out
}

// viewPart is one view's content: a consumer and its amounts per bucket.
type viewPart struct {
	consumer ledger.Consumer
	amounts  map[ledger.BucketKey]int64
	metadata builtins.ClaimMetadata
	only     bool // its claim's only view: metadata.name is its name
}

// splitClaim splits a claim into views: by consumer, then so that no view
// lists a resource type twice. Non-positive amounts count nothing, as in
// Amounts.
func splitClaim(c ledger.Claim) []*viewPart {
	sums := map[ledger.BucketKey]int64{}
	for _, r := range c.Requests {
		if r.Amount <= 0 {
			continue
		}
		key := ledger.NewBucketKey(r.Consumer, r.ResourceType, r.Dimensions)
		sum, err := ledger.Add(sums[key], r.Amount)
		if err != nil {
			continue // the ledger refuses such a claim; Amounts reports it
		}
		sums[key] = sum
	}
	var parts []*viewPart
	for _, key := range slices.SortedFunc(maps.Keys(sums), counting.CompareKeys) {
		i := slices.IndexFunc(parts, func(p *viewPart) bool {
			return p.consumer == key.Consumer && !slices.ContainsFunc(slices.Collect(maps.Keys(p.amounts)),
				func(k ledger.BucketKey) bool { return k.ResourceType == key.ResourceType })
		})
		if i < 0 {
			parts = append(parts, &viewPart{consumer: key.Consumer, amounts: map[ledger.BucketKey]int64{}})
			i = len(parts) - 1
		}
		parts[i].amounts[key] = sums[key]
	}
	return parts
}

func (p *viewPart) keys() []ledger.BucketKey {
	return slices.SortedFunc(maps.Keys(p.amounts), func(a, b ledger.BucketKey) int {
		return cmp.Or(cmp.Compare(a.ResourceType, b.ResourceType), counting.CompareKeys(a, b))
	})
}

// identity is what makes two parts the same view: consumer and buckets.
func (p *viewPart) identity() string {
	var b strings.Builder
	for _, k := range p.keys() {
		b.WriteString(k.String())
		b.WriteByte('\n')
	}
	return b.String()
}

func (p *viewPart) generatedName(obj ViewedObject) string {
	prefix := cmp.Or(p.metadata.GenerateName, p.metadata.Name, obj.Name)
	fields := []string{obj.UID}
	for _, k := range p.keys() {
		fields = append(fields, k.Name())
	}
	return viewNames.Name(prefix, fields...)
}

func (p *viewPart) view(obj ViewedObject, systemNamespace string) *quotav1alpha1.ResourceClaim {
	name := p.metadata.Name
	if !p.only || name == "" {
		name = p.generatedName(obj)
	}
	ns := p.metadata.Namespace
	switch {
	case ns != "":
	case obj.Namespace != "":
		ns = obj.Namespace
	case obj.APIVersion == "v1" && obj.Kind == "Namespace":
		ns = obj.Name
	default:
		ns = systemNamespace
	}
	labels := map[string]string{}
	maps.Copy(labels, p.metadata.Labels)
	labels[quotav1alpha1.ViewLabel] = "true"
	labels[quotav1alpha1.AutoCreatedLabel] = "true"
	v := &quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: maps.Clone(p.metadata.Annotations)},
		Spec: quotav1alpha1.ResourceClaimSpec{
			ConsumerRef: ledgerconv.ConsumerRef(p.consumer),
			ResourceRef: &quotav1alpha1.ObjectRef{
				APIGroup: apiGroup(obj.APIVersion), Kind: obj.Kind, Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID,
			},
		},
	}
	if obj.ClusterScoped || obj.Namespace == ns {
		// As Milo owns its claims: the object is not the claim's
		// controller, and deleting it never waits on the claim.
		v.OwnerReferences = []metav1.OwnerReference{{APIVersion: obj.APIVersion, Kind: obj.Kind, Name: obj.Name, UID: types.UID(obj.UID),
			Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false)}}
	}
	for _, k := range p.keys() {
		v.Spec.Requests = append(v.Spec.Requests, quotav1alpha1.ResourceRequest{
			ResourceType: k.ResourceType, Amount: p.amounts[k], Dimensions: map[string]string(k.DimensionSet()),
		})
	}
	for i := range v.Spec.Requests {
		if len(v.Spec.Requests[i].Dimensions) == 0 {
			v.Spec.Requests[i].Dimensions = nil
		}
	}
	return v
}

// ViewStatus is a view's status, in the words of Milo's claims:
// Granted=True, reason QuotaAvailable, "All N resource requests have been
// granted", for the view's generation, and one granted allocation per
// request from its bucket. Transition times are kept from old where nothing
// transitioned. What tells a view from a decided claim is its labels.
func ViewStatus(v *quotav1alpha1.ResourceClaim, old quotav1alpha1.ResourceClaimStatus, now metav1.Time) quotav1alpha1.ResourceClaimStatus {
	msg := fmt.Sprintf("All %d resource requests have been granted", len(v.Spec.Requests))
	st := quotav1alpha1.ResourceClaimStatus{ObservedGeneration: v.Generation}
	consumer := ledgerconv.Consumer(v.Spec.ConsumerRef)
	for _, r := range v.Spec.Requests {
		a := quotav1alpha1.RequestAllocation{
			ResourceType: r.ResourceType, Status: quotav1alpha1.AllocationGranted, Reason: quotav1alpha1.ReasonQuotaAvailable,
			AllocatedAmount: r.Amount, AllocatingBucket: ledger.NewBucketKey(consumer, r.ResourceType, r.Dimensions).Name(),
			LastTransitionTime: now,
		}
		for _, o := range old.Allocations {
			if o.ResourceType == a.ResourceType && o.Status == a.Status {
				a.LastTransitionTime = o.LastTransitionTime
			}
		}
		st.Allocations = append(st.Allocations, a)
	}
	cond := metav1.Condition{Type: quotav1alpha1.ConditionGranted, Status: metav1.ConditionTrue, Reason: quotav1alpha1.ReasonQuotaAvailable,
		Message: msg, ObservedGeneration: v.Generation, LastTransitionTime: now}
	for _, o := range old.Conditions {
		if o.Type == cond.Type && o.Status == cond.Status {
			cond.LastTransitionTime = o.LastTransitionTime
		}
	}
	st.Conditions = []metav1.Condition{cond}
	return st
}

func apiGroup(apiVersion string) string {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return ""
	}
	return group
}

// claimOrder sorts recorded claims by what they name and count.
func claimOrder(rc builtins.RecordedClaim) string {
	md := rc.Metadata
	reqs := make([]string, 0, len(rc.Claim.Requests))
	for _, r := range rc.Claim.Requests {
		reqs = append(reqs, fmt.Sprintf("%s=%d", ledger.NewBucketKey(r.Consumer, r.ResourceType, r.Dimensions), r.Amount))
	}
	slices.Sort(reqs)
	return strings.Join(append([]string{md.Name, md.GenerateName, md.Namespace}, reqs...), "\n")
}
