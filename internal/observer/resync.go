package observer

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// Listing: everything to evaluate again on a resync, and every bucket to
// write once the observer is ready.

// constraintItems lists every constraint of every loaded template's kind.
func (o *Observer) constraintItems(ctx context.Context) []item {
	o.mu.Lock()
	var gvks []schema.GroupVersionKind
	for gvk := range o.informed {
		gvks = append(gvks, gvk)
	}
	o.mu.Unlock()
	var out []item
	for _, gvk := range gvks {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := o.cache.List(ctx, list); err != nil {
			o.log.Error(err, "listing constraints", "kind", gvk.Kind)
			continue
		}
		for _, c := range list.Items {
			out = append(out, item{kind: itemConstraint, gvk: gvk, name: c.GetName()})
		}
	}
	return out
}

// objectItems lists every object of every watched kind, every claim, and
// every object the tally holds (those gone are then forgotten). With a
// namespace, only what a change of that namespace's labels can move: the
// objects and claims in it, and the Namespace object itself.
func (o *Observer) objectItems(ctx context.Context, namespace string) []item {
	in := func(it item) bool {
		return namespace == "" || it.namespace == namespace || (isNamespaceKind(it.gvk) && it.name == namespace)
	}
	o.mu.Lock()
	var mappings []*meta.RESTMapping
	whole := map[schema.GroupKind]bool{}
	for gk, m := range o.watched {
		mappings = append(mappings, m)
		whole[gk] = o.whole[gk]
	}
	seen := map[item]bool{}
	var out []item
	for _, it := range o.known {
		if in(it) {
			seen[it] = true
			out = append(out, it)
		}
	}
	o.mu.Unlock()
	add := func(it item) {
		if !seen[it] {
			seen[it] = true
			out = append(out, it)
		}
	}
	var opts []client.ListOption
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	for _, m := range mappings {
		gvk := m.GroupVersionKind
		if namespace != "" && m.Scope.Name() == meta.RESTScopeNameRoot {
			if isNamespaceKind(gvk) {
				add(item{kind: itemObject, gvk: gvk, name: namespace})
			}
			continue
		}
		names, err := o.cachedNames(ctx, gvk, whole[gvk.GroupKind()], opts...)
		if err != nil {
			o.log.Error(err, "listing", "kind", gvk.Kind)
			continue
		}
		for _, n := range names {
			add(item{kind: itemObject, gvk: gvk, namespace: n.Namespace, name: n.Name})
		}
	}
	var claims quotav1alpha1.ResourceClaimList
	if err := o.cache.List(ctx, &claims, opts...); err != nil {
		o.log.Error(err, "listing ResourceClaims")
	}
	for _, c := range claims.Items {
		if !quotav1alpha1.IsView(c.Labels) { // counted through their objects
			add(item{kind: itemClaim, gvk: claimGVK, namespace: c.Namespace, name: c.Name})
		}
	}
	return out
}

func isNamespaceKind(gvk schema.GroupVersionKind) bool {
	return gvk.Group == "" && gvk.Kind == "Namespace"
}

// resync reloads every constraint, re-evaluates every object and writes
// every bucket: whatever an event missed is corrected here.
func (o *Observer) resync(ctx context.Context) {
	for _, it := range o.constraintItems(ctx) {
		o.events.Add(it)
	}
	o.mu.Lock()
	waiting := o.waitingForList()
	o.mu.Unlock()
	items := o.objectItems(ctx, "")
	o.listedForRecount(waiting, items)
	for _, it := range items {
		o.events.Add(it)
	}
	o.enqueueAllBuckets(ctx)
	o.enqueueAllViews(ctx)
}

// enqueueAllBuckets queues a write of every bucket that exists or that an
// object counts in: a bucket whose objects are all gone goes to zero.
func (o *Observer) enqueueAllBuckets(ctx context.Context) {
	var buckets quotav1alpha1.AllowanceBucketList
	if err := o.cache.List(ctx, &buckets); err != nil {
		o.log.Error(err, "listing buckets")
	}
	for i := range buckets.Items {
		o.writes.Add(ledgerconv.KeyOf(&buckets.Items[i]))
	}
	o.mu.Lock()
	keys := o.tally.Buckets()
	o.mu.Unlock()
	for _, k := range keys {
		o.writes.Add(k)
	}
}
