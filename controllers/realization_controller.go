package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/quotakeeper/quotakeeper/api/ledgerconv"
	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/grants"
	"github.com/quotakeeper/quotakeeper/ledger"
)

// Claiming resources are any kinds a registration names, so reading them
// takes read access to every kind; narrow this role to your registrations'
// claimingResources if you prefer.
// +kubebuilder:rbac:groups=*,resources=*,verbs=get;list;watch

// realizationReconciler decides the fate of admission reservations, one
// subject (the object reserved for) at a time:
//   - the object exists (same uid): it gets its ResourceClaims, owned by it
//     and carrying the reservation id; the claim controller then moves the
//     amount from reserved to allocated (ledger.Realize). Deleting the object
//     deletes the claims (garbage collection), whose finalizer returns it.
//   - the object does not exist and the reservation has expired: the
//     reservation is returned (ledger.Release of that id in those buckets).
//   - otherwise it looks again at the expiry, or when the object appears.
//
// An object that exists is never expired, however late its realization:
// that is why expiry lives here, per object, and not in a sweep over every
// bucket, which cannot tell an object that never appeared from one whose
// realization is merely late (a manager down for longer than the TTL).
type realizationReconciler struct {
	client          client.Client
	live            client.Reader // the object check must not trust a lagging cache
	cache           cache.Cache
	mapper          meta.RESTMapper
	ledger          *ledger.Ledger
	mirror          *grants.Mirror
	systemNamespace string
	poll            time.Duration
	now             func() time.Time

	// controller is the subject controller, which the dynamic watches
	// (realizationWatchReconciler) feed; watched the kinds they cover.
	controller controller.TypedController[string]
	watched    *watchedKinds
}

func (r *realizationReconciler) setup(mgr ctrl.Manager) error {
	c, err := builder.TypedControllerManagedBy[string](mgr).
		Named("realization").
		Watches(&quotav1alpha1.AllowanceBucket{}, handler.TypedFuncs[client.Object, string]{
			CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[string]) {
				enqueueSubjects(q, nil, e.Object)
			},
			UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[string]) {
				enqueueSubjects(q, e.ObjectOld, e.ObjectNew)
			},
		}).
		// Every ledger write recomputes the bucket's limit, so even a
		// release must wait until the mirror holds every grant.
		WatchesRawSource(grants.Source(r.mirror, func(context.Context, grants.Change) []string { return nil })).
		Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	return nil
}

// enqueueSubjects enqueues the subjects of reservations in obj that were
// not in old: a busy bucket is rewritten often, and its other reservations
// are already scheduled (for their expiry).
func enqueueSubjects(q workqueue.TypedRateLimitingInterface[string], old, obj client.Object) {
	seen := map[string]bool{}
	if b, ok := old.(*quotav1alpha1.AllowanceBucket); ok {
		for _, res := range b.Status.Reservations {
			seen[res.ID] = true
		}
	}
	for _, res := range obj.(*quotav1alpha1.AllowanceBucket).Status.Reservations {
		if !seen[res.ID] {
			q.Add(reservationSubject(res))
		}
	}
}

func (r *realizationReconciler) Reconcile(ctx context.Context, subject string) (reconcile.Result, error) {
	var buckets quotav1alpha1.AllowanceBucketList
	if err := r.client.List(ctx, &buckets, client.MatchingFields{indexBucketSubject: subject}); err != nil {
		return reconcile.Result{}, err
	}
	var held []heldReservation
	for i := range buckets.Items {
		for _, res := range buckets.Items[i].Status.Reservations {
			if reservationSubject(res) == subject {
				held = append(held, heldReservation{key: ledgerconv.KeyOf(&buckets.Items[i]), reservation: res})
			}
		}
	}
	if len(held) == 0 {
		return reconcile.Result{}, nil // realized or returned already
	}
	obj := held[0].reservation.Object
	gvk, namespaced, exists, err := r.lookup(ctx, obj)
	if err != nil {
		return reconcile.Result{}, err
	}
	if exists {
		return reconcile.Result{}, r.ensureClaims(ctx, obj, gvk, namespaced, held)
	}

	now := r.now()
	var expired []heldReservation
	var next time.Time
	for _, h := range held {
		at := h.reservation.ExpiresAt.Time
		if !now.Before(at) {
			expired = append(expired, h)
		} else if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if err := r.expire(ctx, expired); err != nil {
		return reconcile.Result{}, err
	}
	if next.IsZero() {
		return reconcile.Result{}, nil
	}
	wait := next.Sub(now)
	if !r.watched.has(schema.GroupKind{Group: obj.APIGroup, Kind: obj.Kind}) {
		// No event will say the object appeared: look again now and then.
		wait = min(wait, r.poll)
	}
	return reconcile.Result{RequeueAfter: wait}, nil
}

// lookup reports whether the object a reservation names exists with the
// same uid, reading the apiserver: an object created a moment ago must not
// look absent because an informer lags. A kind the server does not serve
// (its CRD went away) has no objects.
func (r *realizationReconciler) lookup(ctx context.Context, obj quotav1alpha1.ObjectRef) (schema.GroupVersionKind, bool, bool, error) {
	if obj.UID == "" || obj.Name == "" {
		return schema.GroupVersionKind{}, false, false, nil // cannot be matched to an object
	}
	mapping, err := r.mapper.RESTMapping(schema.GroupKind{Group: obj.APIGroup, Kind: obj.Kind})
	if meta.IsNoMatchError(err) {
		return schema.GroupVersionKind{}, false, false, nil
	}
	if err != nil {
		return schema.GroupVersionKind{}, false, false, err
	}
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	pom := &metav1.PartialObjectMetadata{}
	pom.SetGroupVersionKind(mapping.GroupVersionKind)
	key := client.ObjectKey{Name: obj.Name}
	if namespaced {
		key.Namespace = obj.Namespace
	}
	if err := r.live.Get(ctx, key, pom); err != nil {
		if apierrors.IsNotFound(err) {
			return mapping.GroupVersionKind, namespaced, false, nil
		}
		return schema.GroupVersionKind{}, false, false, err
	}
	return mapping.GroupVersionKind, namespaced, string(pom.UID) == obj.UID, nil
}

// ensureClaims creates the claims that realize held, if they do not exist.
// A namespaced object's claims live beside it (an owner reference cannot
// cross namespaces); a cluster-scoped object's where its consumer's buckets
// live.
func (r *realizationReconciler) ensureClaims(ctx context.Context, obj quotav1alpha1.ObjectRef, gvk schema.GroupVersionKind, namespaced bool, held []heldReservation) error {
	var errs []error
	for _, g := range groupForClaims(held) {
		claim := &quotav1alpha1.ResourceClaim{}
		claim.Name = g.name(obj)
		claim.Namespace = obj.Namespace
		if !namespaced {
			claim.Namespace = quotav1alpha1.BucketNamespace(ledgerconv.ConsumerRef(g.consumer), r.systemNamespace)
		}
		err := r.client.Get(ctx, client.ObjectKeyFromObject(claim), claim)
		if err == nil {
			continue // made already; the claim controller realizes it
		}
		if !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		claim.Annotations = map[string]string{quotav1alpha1.ReservationIDAnnotation: g.id}
		claim.Finalizers = []string{quotav1alpha1.ClaimFinalizer}
		claim.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: obj.Name, UID: types.UID(obj.UID),
		}}
		claim.Spec = g.spec(obj)
		if err := r.client.Create(ctx, claim); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("create claim %s/%s for reservation %s: %w", claim.Namespace, claim.Name, g.id, err))
			continue
		}
		log.FromContext(ctx).Info("realizing reservation", "reservation", g.id, "object", obj, "claim", client.ObjectKeyFromObject(claim))
	}
	return errors.Join(errs...)
}

// expire returns expired reservations whose object never appeared: a
// Release of the reservation's id in the buckets that hold it.
func (r *realizationReconciler) expire(ctx context.Context, expired []heldReservation) error {
	byID := map[string]*ledger.Claim{}
	var ids []string
	for _, h := range expired {
		c := byID[h.reservation.ID]
		if c == nil {
			c = &ledger.Claim{ID: h.reservation.ID}
			byID[h.reservation.ID] = c
			ids = append(ids, h.reservation.ID)
		}
		c.Requests = append(c.Requests, ledger.Request{
			Consumer: h.key.Consumer, ResourceType: h.key.ResourceType,
			Amount:     max(h.reservation.Amount, 1), // Release ignores it; validation wants it positive
			Dimensions: h.key.DimensionSet(),
		})
	}
	slices.Sort(ids)
	var errs []error
	for _, id := range ids {
		if err := r.ledger.Release(ctx, *byID[id]); err != nil {
			errs = append(errs, err)
			continue
		}
		log.FromContext(ctx).Info("reservation expired", "reservation", id, "object", expired[0].reservation.Object)
	}
	return errors.Join(errs...)
}
