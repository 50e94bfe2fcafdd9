package observer

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/dynwatch"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// Informers: the fixed ones (templates, namespaces, claims, buckets) and one
// per kind the loaded constraints match.

// watchFixed adds the handlers on the informers every observer needs. Each
// GetInformer waits for its informer to sync.
func (o *Observer) watchFixed(ctx context.Context) error {
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(templateGVK)
	// Gatekeeper may be installed after the manager: wait for its CRD.
	for {
		err := o.inform(ctx, tmpl, func(obj client.Object) {
			o.events.Add(item{kind: itemTemplate, name: obj.GetName()})
		}, nil)
		if err == nil {
			break
		}
		o.log.Info("cannot watch ConstraintTemplates yet (is Gatekeeper installed?)", "error", err.Error())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(10 * time.Second):
		}
	}
	if err := o.inform(ctx, &corev1.Namespace{}, func(obj client.Object) {
		o.events.Add(item{kind: itemNamespace, name: obj.GetName()})
	}, labelsChanged); err != nil {
		return err
	}
	if err := o.inform(ctx, &quotav1alpha1.ResourceClaim{}, func(obj client.Object) {
		// A view is checked against what its object wants (a deleted
		// view is written again); any other claim is counted, and may
		// hold or free a view's name.
		o.viewsDirty(client.ObjectKeyFromObject(obj))
		if !quotav1alpha1.IsView(obj.GetLabels()) {
			o.event(item{kind: itemClaim, gvk: claimGVK, namespace: obj.GetNamespace(), name: obj.GetName()})
		}
	}, nil); err != nil {
		return err
	}
	// A new reservation is something to fold or, later, expire.
	return o.inform(ctx, &quotav1alpha1.AllowanceBucket{}, func(obj client.Object) {
		if b, ok := obj.(*quotav1alpha1.AllowanceBucket); ok && len(b.Status.Reservations) > 0 && o.ready.Load() {
			o.writes.Add(ledgerconv.KeyOf(b))
		}
	}, nil)
}

// labelsChanged: a namespace's labels name its consumers.
func labelsChanged(oldObj, newObj client.Object) bool {
	return !equalLabels(oldObj.GetLabels(), newObj.GetLabels())
}

func equalLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// inform adds a handler calling fn on every add, delete and update (those
// that pass changed, when given) of obj's kind.
func (o *Observer) inform(ctx context.Context, obj client.Object, fn func(client.Object), changed func(oldObj, newObj client.Object) bool) error {
	_, err := informFrom(ctx, o.cache, obj, fn, changed)
	return err
}

// informFrom is inform on the informers of from; it returns the informer.
func informFrom(ctx context.Context, from cache.Informers, obj client.Object, fn func(client.Object), changed func(oldObj, newObj client.Object) bool, opts ...cache.InformerGetOption) (cache.Informer, error) {
	inf, err := from.GetInformer(ctx, obj, opts...)
	if err != nil {
		return nil, err
	}
	unwrap := func(x any) client.Object {
		if d, ok := x.(toolscache.DeletedFinalStateUnknown); ok {
			x = d.Obj
		}
		c, _ := x.(client.Object)
		return c
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(x any) {
			if c := unwrap(x); c != nil {
				fn(c)
			}
		},
		UpdateFunc: func(oldX, newX any) {
			oldObj, newObj := unwrap(oldX), unwrap(newX)
			if newObj == nil || oldObj == nil || oldObj.GetResourceVersion() == newObj.GetResourceVersion() {
				return
			}
			if changed == nil || changed(oldObj, newObj) {
				fn(newObj)
			}
		},
		DeleteFunc: func(x any) {
			if c := unwrap(x); c != nil {
				fn(c)
			}
		},
	})
	return inf, err
}

// watchMatchedKinds starts an informer for every kind a loaded constraint
// matches. Informers are never stopped: a kind no longer matched costs an
// informer until the manager restarts. A kind the manager may not read is
// left out (access.go) and reported as blind: the caller tries again.
func (o *Observer) watchMatchedKinds(ctx context.Context) (blind bool, err error) {
	// One at a time: evaluate workers call it for each constraint they
	// load, and a kind must get one informer and one handler.
	o.watching.Lock()
	defer o.watching.Unlock()
	kinds, unwatchable := o.policy.matchKinds()
	if len(unwatchable) > 0 {
		o.log.Info("constraints that match every kind count nothing here: name their kinds in spec.match.kinds", "constraints", unwatchable)
	}
	var errs []error
	blindKinds := map[schema.GroupKind]error{}
	regained := false
	for _, gk := range kinds {
		whole := o.policy.needsWholeObject(gk)
		o.mu.Lock()
		_, ok := o.watched[gk]
		ok = ok && (o.whole[gk] || !whole)
		_, wasBlind := o.blind[gk]
		o.mu.Unlock()
		if ok {
			continue
		}
		mapping, err := o.mapper.RESTMapping(gk)
		if err != nil {
			errs = append(errs, fmt.Errorf("kind %s: %w", gk, err))
			continue
		}
		if err := dynwatch.CheckRead(ctx, o.client, mapping); err != nil {
			blindKinds[gk] = err
			continue
		}
		key := listingKey{gk, whole}
		l := o.listing[key]
		if l == nil {
			// A kind watched as metadata that now needs whole objects gets
			// a second informer; the first stays (informers are never
			// stopped).
			var obj client.Object = &metav1.PartialObjectMetadata{}
			if whole {
				obj = &unstructured.Unstructured{}
			}
			obj.GetObjectKind().SetGroupVersionKind(mapping.GroupVersionKind)
			if l, err = o.startInformer(ctx, obj); err != nil {
				blindKinds[gk] = fmt.Errorf("watch %s: %w", gk, err)
				continue
			}
			o.listing[key] = l
		}
		if err := l.waitSynced(ctx, informTimeout); err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			listing := time.Since(l.since).Round(time.Second)
			if listing < informGiveUp {
				// Kept: a kind of many objects on a busy server may list
				// for longer; a new informer would begin again.
				blindKinds[gk] = fmt.Errorf("watch %s: its first list has not ended after %s", gk, listing)
				continue
			}
			// A list that fails is retried forever: begin again.
			o.dropListing(key, l)
			blindKinds[gk] = fmt.Errorf("watch %s: no first list after %s: %w", gk, listing, err)
			continue
		}
		if err := l.source.setInformer(l.inf); err != nil {
			o.dropListing(key, l)
			blindKinds[gk] = fmt.Errorf("watch %s: %w", gk, err)
			continue
		}
		delete(o.listing, key)
		o.mu.Lock()
		o.watched[gk] = mapping
		o.whole[gk] = whole
		o.mu.Unlock()
		regained = regained || wasBlind
	}
	o.setBlind(ctx, blindKinds)
	if regained && o.ready.Load() {
		// The buckets held back are written again, from the kind's objects.
		o.events.Add(item{kind: itemResync})
	}
	return len(blindKinds) > 0, errors.Join(errs...)
}

// listingKey names an informer of a counted kind: as metadata, or whole.
type listingKey struct {
	gk    schema.GroupKind
	whole bool
}

// listingInformer is a counted kind's informer, with our handler, until
// its first list ends. One that outlasts informTimeout is kept (the kind
// blind meanwhile) and waited for again at the next try, up to
// informGiveUp: at hundreds of thousands of objects on a busy API server a
// first list takes longer, and an informer started again would begin it
// again.
type listingInformer struct {
	obj    client.Object
	inf    cache.Informer
	source *barrierSource
	since  time.Time
}

// startInformer starts the informer of obj's kind without waiting for its
// first list, its handler queueing every object it delivers.
func (o *Observer) startInformer(ctx context.Context, obj client.Object) (*listingInformer, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	// The barrier that frees sums asks how far this handler has delivered,
	// from the initial list on (barrier.go).
	source := o.addBarrierSource(gvk)
	inf, err := informFrom(ctx, o.objects, obj, func(c client.Object) {
		source.saw(c)
		o.event(item{kind: itemObject, gvk: gvk, namespace: c.GetNamespace(), name: c.GetName()})
	}, nil, cache.BlockUntilSynced(false))
	if err != nil {
		o.removeBarrierSource(source)
		_ = o.objects.RemoveInformer(context.Background(), obj)
		return nil, err
	}
	return &listingInformer{obj: obj, inf: inf, source: source, since: time.Now()}, nil
}

// waitSynced waits up to timeout for the informer's first list to end.
func (l *listingInformer) waitSynced(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !toolscache.WaitForCacheSync(ctx.Done(), l.inf.HasSynced) {
		return fmt.Errorf("failed waiting for its informer to sync: %w", context.DeadlineExceeded)
	}
	return nil
}

// dropListing stops an informer whose first list did not end. The caller
// holds o.watching.
func (o *Observer) dropListing(key listingKey, l *listingInformer) {
	delete(o.listing, key)
	o.removeBarrierSource(l.source)
	_ = o.objects.RemoveInformer(context.Background(), l.obj)
}

func (o *Observer) markInformed(gvk schema.GroupVersionKind) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.informed[gvk] {
		return false
	}
	o.informed[gvk] = true
	return true
}

func (o *Observer) unmarkInformed(gvk schema.GroupVersionKind) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.informed, gvk)
}

func (o *Observer) watchedKinds() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for gk := range o.watched {
		out = append(out, gk.String())
	}
	return out
}

// cachedObject reads an object of a watched kind from the informer that
// holds it: whole, or as its metadata only (apiVersion, kind, metadata),
// which is all a template declaring ReadsAnnotation "metadata" reads.
func (o *Observer) cachedObject(ctx context.Context, gvk schema.GroupVersionKind, key types.NamespacedName, whole bool) (*unstructured.Unstructured, error) {
	if whole {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u, o.objects.Get(ctx, key, u)
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	if err := o.objects.Get(ctx, key, m); err != nil {
		return nil, err
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// cachedNames lists the namespaces and names of a watched kind's objects
// from the informer that holds them.
func (o *Observer) cachedNames(ctx context.Context, gvk schema.GroupVersionKind, whole bool, opts ...client.ListOption) ([]types.NamespacedName, error) {
	var list client.ObjectList = &metav1.PartialObjectMetadataList{}
	if whole {
		list = &unstructured.UnstructuredList{}
	}
	list.GetObjectKind().SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := o.objects.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	var out []types.NamespacedName
	err := meta.EachListItem(list, func(obj runtime.Object) error {
		m, err := meta.Accessor(obj)
		if err == nil {
			out = append(out, types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()})
		}
		return err
	})
	return out, err
}

// uncounted is the transform of the informers of counted kinds. Managed
// fields are dropped (no policy reads them), and so is everything but the
// metadata of a namespaced object that no loaded constraint matches (its
// namespace is in no constraint's scope): a tenant's large objects in a
// namespace no quota covers cost the manager their metadata, not their
// content. The decision is taken as the event arrives; an object stripped
// under the constraints of then and matched under those of now is read
// whole from the API server when it is evaluated (processObject).
func (o *Observer) uncounted(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	u, ok := obj.(*unstructured.Unstructured)
	if err != nil || !ok || u.GetNamespace() == "" {
		return obj, err
	}
	if o.policy.mayCount(u, o.cachedNamespace(context.Background(), u.GetNamespace())) {
		return u, nil
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": u.Object["apiVersion"], "kind": u.Object["kind"], "metadata": u.Object["metadata"], strippedField: true,
	}}, nil
}

// strippedField marks an object uncounted kept the metadata of only.
const strippedField = "quotakeeper.miloapis.com/metadata-only"

func stripped(u *unstructured.Unstructured) bool { return u.Object[strippedField] == true }

// cachedNamespace is the namespace of that name from the cache; nil when
// it is not there (yet).
func (o *Observer) cachedNamespace(ctx context.Context, name string) *corev1.Namespace {
	ns := &corev1.Namespace{}
	if err := o.cache.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		return nil
	}
	return ns
}
