package controllers

// The realization watches: a controller over ResourceRegistrations that
// serves the realization controller (realization_controller.go) by adding a
// watch for every kind a registration claims.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// realizationWatchReconciler adds a metadata-only watch, feeding the
// realization controller, for each kind a registration claims, so an
// object's creation triggers its realization at once instead of at the
// next poll. The kinds to watch come from the registrations, as they appear.
type realizationWatchReconciler struct {
	client client.Client
	cache  cache.Cache
	mapper meta.RESTMapper
	// realization is the controller the watches feed; it must be set up
	// first (its controller exists from then on).
	realization *realizationReconciler
}

func (r *realizationWatchReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("realization-watches").
		For(&quotav1alpha1.ResourceRegistration{}).
		Complete(r)
}

// Reconcile adds the watches a registration's claiming resources need.
// Watches are never removed: a kind that stops being claimed only costs an
// informer until the manager restarts.
func (r *realizationWatchReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	reg := &quotav1alpha1.ResourceRegistration{}
	if err := r.client.Get(ctx, req.NamespacedName, reg); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	watched := r.realization.watched
	var missing []string
	for _, gk := range reg.Spec.ClaimingResources {
		kind := schema.GroupKind{Group: gk.APIGroup, Kind: gk.Kind}
		if watched.has(kind) {
			continue
		}
		mapping, err := r.mapper.RESTMapping(kind)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s: %v", kind, err))
			continue
		}
		pom := &metav1.PartialObjectMetadata{}
		pom.SetGroupVersionKind(mapping.GroupVersionKind)
		src := source.TypedKind[client.Object, string](r.cache, pom, handler.TypedFuncs[client.Object, string]{
			CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[string]) {
				r.enqueueObject(ctx, q, e.Object)
			},
		})
		if err := r.realization.controller.Watch(src); err != nil {
			return reconcile.Result{}, err
		}
		watched.add(kind)
	}
	if len(missing) > 0 {
		// Often a CRD not installed yet; its objects are still realized by
		// polling (ObjectPollInterval) until the watch is in place.
		log.FromContext(ctx).Info("cannot watch claiming resources yet", "registration", reg.Name, "kinds", missing)
		return reconcile.Result{RequeueAfter: 30 * time.Second}, nil
	}
	return reconcile.Result{}, nil
}

// enqueueObject enqueues a new object's uid if a reservation waits for it.
func (r *realizationWatchReconciler) enqueueObject(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], obj client.Object) {
	var buckets quotav1alpha1.AllowanceBucketList
	if err := r.client.List(ctx, &buckets, client.MatchingFields{indexBucketSubject: string(obj.GetUID())}); err != nil || len(buckets.Items) > 0 {
		q.Add(string(obj.GetUID())) // on a list error, let Reconcile find out
	}
}

// watchedKinds are the kinds the realization controller has a watch for;
// the realization controller polls for objects of every other kind.
type watchedKinds struct {
	mu    sync.Mutex
	kinds map[schema.GroupKind]bool
}

func (w *watchedKinds) has(gk schema.GroupKind) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.kinds[gk]
}

func (w *watchedKinds) add(gk schema.GroupKind) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.kinds == nil {
		w.kinds = map[schema.GroupKind]bool{}
	}
	w.kinds[gk] = true
}
