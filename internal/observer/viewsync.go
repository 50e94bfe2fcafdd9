package observer

// Writing the views (views.go builds them): what each object's views should
// be, kept under the observer's lock, and a controller (observer-views,
// controllers.go) of view names whose workers make the ResourceClaims
// match. Its queue, its workers and its client (with a rate limiter of its
// own) are separate from the bucket writes, so views never delay a bucket
// write, and a view's failure changes nothing counted.

import (
	"context"
	"maps"
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// desiredView is one view an object should have.
type desiredView struct {
	claim *quotav1alpha1.ResourceClaim
	// frozen: the object is being deleted. Its views are left as they are
	// (the garbage collector may be removing or orphaning them) until the
	// object is gone, and then removed.
	frozen bool
}

// viewSet is what every evaluated object's views should be. Not safe for
// concurrent use (the observer's lock guards it).
type viewSet struct {
	byRef map[string][]types.NamespacedName
	// byName: the objects that want each view name, sorted by ref. Nearly
	// always one: a slice, not a map of one, which would allocate a group
	// of eight slots per counted object.
	byName map[types.NamespacedName][]wanter
}

// wanter is one object that wants a view name, and the view it wants.
type wanter struct {
	ref  string
	view desiredView
}

func newViewSet() *viewSet {
	return &viewSet{byRef: map[string][]types.NamespacedName{}, byName: map[types.NamespacedName][]wanter{}}
}

// find returns where ref is, or would be, among the wanters of name.
func (s *viewSet) find(name types.NamespacedName, ref string) (int, bool) {
	return slices.BinarySearchFunc(s.byName[name], ref, func(w wanter, ref string) int { return strings.Compare(w.ref, ref) })
}

// set records the views of the object under ref and returns the names
// whose wanted view changed.
func (s *viewSet) set(ref string, views []desiredView) []types.NamespacedName {
	var changed []types.NamespacedName
	next := map[types.NamespacedName]desiredView{}
	for _, v := range views {
		next[client.ObjectKeyFromObject(v.claim)] = v
	}
	for _, name := range s.byRef[ref] {
		if _, ok := next[name]; ok {
			continue
		}
		if i, had := s.find(name, ref); had {
			if wanters := slices.Delete(s.byName[name], i, i+1); len(wanters) > 0 {
				s.byName[name] = wanters
			} else {
				delete(s.byName, name)
			}
		}
		changed = append(changed, name)
	}
	names := make([]types.NamespacedName, 0, len(next))
	for name, v := range next {
		names = append(names, name)
		i, had := s.find(name, ref)
		if !had {
			s.byName[name] = slices.Insert(s.byName[name], i, wanter{ref: ref, view: v})
		} else if old := s.byName[name][i].view; old.frozen != v.frozen || !apiequality.Semantic.DeepEqual(old.claim, v.claim) {
			s.byName[name][i].view = v
		} else {
			continue
		}
		changed = append(changed, name)
	}
	if len(names) == 0 {
		delete(s.byRef, ref)
	} else {
		s.byRef[ref] = names
	}
	return changed
}

// get returns the view wanted under name: the one of the first object (by
// ref) that wants it, and the refs of any other object that wants the same
// name (a policy naming two objects' claims alike).
func (s *viewSet) get(name types.NamespacedName) (v desiredView, others []string, ok bool) {
	wanters := s.byName[name]
	if len(wanters) == 0 {
		return desiredView{}, nil, false
	}
	for _, w := range wanters[1:] {
		others = append(others, w.ref)
	}
	return wanters[0].view, others, true
}

func (s *viewSet) names() []types.NamespacedName {
	return slices.Collect(maps.Keys(s.byName))
}

// setViews records an object's views and queues the changed ones.
func (o *Observer) setViews(ref string, views []desiredView) {
	if o.views == nil {
		return
	}
	o.mu.Lock()
	changed := o.views.set(ref, views)
	o.mu.Unlock()
	o.viewsDirty(changed...)
}

func (o *Observer) viewsDirty(names ...types.NamespacedName) {
	if o.views == nil || !o.ready.Load() {
		return // the first view writes wait for the initial load, as bucket writes do
	}
	for _, n := range names {
		o.viewQueue.Add(n)
	}
}

// enqueueAllViews queues every view wanted and every view that exists (a
// view whose object went away while no observer ran is removed).
func (o *Observer) enqueueAllViews(ctx context.Context) {
	if o.views == nil {
		return
	}
	o.mu.Lock()
	names := o.views.names()
	o.mu.Unlock()
	var existing quotav1alpha1.ResourceClaimList
	if err := o.cache.List(ctx, &existing, client.MatchingLabels{quotav1alpha1.ViewLabel: "true"}); err != nil {
		o.log.Error(err, "listing ResourceClaim views")
	}
	for i := range existing.Items {
		names = append(names, client.ObjectKeyFromObject(&existing.Items[i]))
	}
	o.viewsDirty(names...)
}

// reconcileView is the views controller's reconciler: syncView, except that
// a write the API server refuses is logged and left to the next resync.
func (o *Observer) reconcileView(ctx context.Context, name types.NamespacedName) (reconcile.Result, error) {
	err := o.syncView(ctx, name)
	if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsBadRequest(err) {
		// Refused (a claim webhook's verdict, a terminating or missing
		// namespace): retrying soon would be refused again.
		o.log.Error(err, "ResourceClaim view refused; trying again at the next resync", logView(name)...)
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, err
}

// syncView makes the ResourceClaim under name what the objects want:
// created, corrected or removed. It reads from the cache and writes
// through the views' own client; a write it causes comes back as an event
// and is checked again.
func (o *Observer) syncView(ctx context.Context, name types.NamespacedName) error {
	o.mu.Lock()
	want, others, wanted := o.views.get(name)
	o.mu.Unlock()
	have := &quotav1alpha1.ResourceClaim{}
	if err := o.cache.Get(ctx, name, have); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		have = nil
	}
	switch {
	case !wanted:
		if have == nil || !quotav1alpha1.IsView(have.Labels) || have.DeletionTimestamp != nil {
			return nil
		}
		return o.deleteView(ctx, have)
	case len(others) > 0:
		o.log.Info("several objects' claims name the same ResourceClaim view; the first one's is written",
			"view", name.String(), "written", want.claim.Spec.ResourceRef, "others", strings.Join(others, ", "))
	}
	switch {
	case want.frozen:
		return nil
	case have == nil:
		return o.createView(ctx, want.claim)
	case !quotav1alpha1.IsView(have.Labels):
		o.log.Info("a ResourceClaim that is not a view holds a view's name; no view is written", "view", name.String())
		return nil
	case have.DeletionTimestamp != nil:
		return nil // its delete event brings it back here
	case !apiequality.Semantic.DeepEqual(have.Spec, want.claim.Spec):
		// The spec is immutable: a view whose object counts something
		// else is replaced; its delete event brings it back here.
		return o.deleteView(ctx, have)
	}
	if metadataDrifted(have, want.claim) {
		patch := client.MergeFrom(have.DeepCopy())
		if have.Labels == nil {
			have.Labels = map[string]string{}
		}
		maps.Copy(have.Labels, want.claim.Labels)
		if len(want.claim.Annotations) > 0 && have.Annotations == nil {
			have.Annotations = map[string]string{}
		}
		maps.Copy(have.Annotations, want.claim.Annotations)
		// A copy: the patch's response is decoded into have, and would
		// otherwise write into the wanted view's slice.
		have.OwnerReferences = slices.Clone(want.claim.OwnerReferences)
		if err := o.viewClient.Patch(ctx, have, patch); err != nil {
			return err
		}
	}
	return o.writeViewStatus(ctx, have)
}

func (o *Observer) createView(ctx context.Context, want *quotav1alpha1.ResourceClaim) error {
	v := want.DeepCopy()
	// AlreadyExists (the cache has not seen a view just written) is
	// retried with backoff, like any other error.
	if err := o.viewClient.Create(ctx, v); err != nil {
		return err
	}
	return o.writeViewStatus(ctx, v)
}

// writeViewStatus sets the view's status (Granted=True, Observed) unless it
// already says so.
func (o *Observer) writeViewStatus(ctx context.Context, v *quotav1alpha1.ResourceClaim) error {
	st := ViewStatus(v, v.Status, metav1.Now())
	if quotav1alpha1.SameClaimStatus(v.Status, st) {
		return nil
	}
	v.Status = st
	return client.IgnoreNotFound(o.viewClient.Status().Update(ctx, v))
}

func (o *Observer) deleteView(ctx context.Context, v *quotav1alpha1.ResourceClaim) error {
	uid := v.UID
	err := o.viewClient.Delete(ctx, v, client.Preconditions{UID: &uid})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone already, or another claim now holds the name: its event brings it here
	}
	return err
}

// metadataDrifted reports whether the view lacks a label or annotation it
// should carry, or names other owners. Labels and annotations others add
// are left alone.
func metadataDrifted(have, want *quotav1alpha1.ResourceClaim) bool {
	for k, v := range want.Labels {
		if w, ok := have.Labels[k]; !ok || w != v {
			return true
		}
	}
	for k, v := range want.Annotations {
		if w, ok := have.Annotations[k]; !ok || w != v {
			return true
		}
	}
	return !apiequality.Semantic.DeepEqual(have.OwnerReferences, want.OwnerReferences)
}
