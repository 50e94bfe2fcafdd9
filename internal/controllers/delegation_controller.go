package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/delegation"
	"github.com/quotakeeper/quotakeeper/internal/grants"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// delegationRecheck is how soon an expired hand-out whose grant the live
// read finds at its generation, but the cache does not hold yet, is looked
// at again.
const delegationRecheck = time.Second

// delegationReconciler is the observer of delegated subdivision: for each
// parent's delegation bucket it writes, through ledger.Observe, what the
// live delegated grants hand out (package delegation's Tally), folding the
// reservations of the grants it counts in the same write, and expiring
// those whose create or update never came (refused after the webhook, or
// abandoned). A lowered or deleted hand-out returns to the cap with the
// first write after the cache sees it. Leader only, like every controller:
// it is the only writer of a delegation bucket's allocated.
type delegationReconciler struct {
	client client.Client
	// live reads a grant the cache may not hold yet.
	live   client.Reader
	ledger *ledger.Ledger
	mirror *grants.Mirror
	now    func() time.Time

	systemNamespace string
}

func (r *delegationReconciler) setup(mgr ctrl.Manager) error {
	return builder.TypedControllerManagedBy[ledger.BucketKey](mgr).
		Named("delegation").
		Watches(&quotav1alpha1.ResourceGrant{}, delegationGrantEvents{}).
		Watches(&quotav1alpha1.AllowanceBucket{}, handler.TypedEnqueueRequestsFromMapFunc(
			func(_ context.Context, o client.Object) []ledger.BucketKey {
				key := ledgerconv.KeyOf(o.(*quotav1alpha1.AllowanceBucket))
				if _, ok := quotav1alpha1.DelegatedBase(key.ResourceType); !ok {
					return nil
				}
				return []ledger.BucketKey{key}
			})).
		// A cap changed: the delegation bucket's limit with it. Also holds
		// the workers until the mirror has synced, since every write
		// recomputes the limit from it.
		WatchesRawSource(grants.Source(r.mirror, func(_ context.Context, c grants.Change) []ledger.BucketKey {
			if _, ok := quotav1alpha1.DelegatedBase(c.ResourceType); !ok {
				return nil
			}
			return []ledger.BucketKey{ledger.NewBucketKey(c.Consumer, c.ResourceType, nil)}
		})).
		Complete(r)
}

// delegationGrantEvents enqueues the delegation buckets a grant hands out
// from, before and after a change: an update that drops a resource type
// returns its amount to that bucket.
type delegationGrantEvents struct{}

func keysOf(o client.Object) []ledger.BucketKey {
	g, ok := o.(*quotav1alpha1.ResourceGrant)
	if !ok {
		return nil
	}
	amounts, _ := delegation.Amounts(g)
	var out []ledger.BucketKey
	for rt := range amounts {
		out = append(out, delegation.Key(delegation.Parent(g), rt))
	}
	return out
}

func addAll(q workqueue.TypedRateLimitingInterface[ledger.BucketKey], keys []ledger.BucketKey) {
	for _, k := range keys {
		q.Add(k)
	}
}

func (delegationGrantEvents) Create(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[ledger.BucketKey]) {
	addAll(q, keysOf(e.Object))
}

func (delegationGrantEvents) Update(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[ledger.BucketKey]) {
	addAll(q, keysOf(e.ObjectOld))
	addAll(q, keysOf(e.ObjectNew))
}

func (delegationGrantEvents) Delete(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[ledger.BucketKey]) {
	addAll(q, keysOf(e.Object))
}

func (delegationGrantEvents) Generic(_ context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[ledger.BucketKey]) {
	addAll(q, keysOf(e.Object))
}

func (r *delegationReconciler) Reconcile(ctx context.Context, key ledger.BucketKey) (reconcile.Result, error) {
	var all quotav1alpha1.ResourceGrantList
	if err := r.client.List(ctx, &all, client.MatchingFields{indexGrantDelegation: key.Name()}); err != nil {
		return reconcile.Result{}, err
	}
	tally, errs := delegation.Count(all.Items)
	if len(errs) > 0 {
		// The webhook refuses such amounts; one stored anyway is not
		// counted, which would hand out more than the cap: refuse to
		// write until it is mended.
		return reconcile.Result{}, errors.Join(errs...)
	}
	obs, err := tally.Observation(key)
	if err != nil {
		return reconcile.Result{}, err
	}
	bucket := &quotav1alpha1.AllowanceBucket{}
	err = r.client.Get(ctx, types.NamespacedName{
		Namespace: quotav1alpha1.BucketNamespace(ledgerconv.ConsumerRef(key.Consumer), r.systemNamespace), Name: key.Name(),
	}, bucket)
	switch {
	case apierrors.IsNotFound(err):
		if obs.Count == 0 {
			return reconcile.Result{}, nil // nothing handed out, nothing to show
		}
		bucket = nil
	case err != nil:
		return reconcile.Result{}, err
	}
	var result reconcile.Result
	if bucket != nil {
		if obs.Expire, result, err = r.expired(ctx, bucket, obs.Counted); err != nil {
			return reconcile.Result{}, err
		}
	}
	if _, err := r.ledger.Observe(ctx, key, obs); err != nil {
		return reconcile.Result{}, fmt.Errorf("delegation bucket %s: %w", key.Name(), err)
	}
	return result, nil
}

// expired lists the bucket's reservations whose grant will never be
// counted at their generation: past their expiry, the grant is absent, is
// another grant (another uid), or never reached that generation (the update
// was refused after the webhook); before it, an update's grant is gone. One
// the count folds is not expired, nor one whose grant the live read finds
// at its generation (the cache is behind: looked at again shortly). The result asks to come back at the
// earliest expiry still ahead.
func (r *delegationReconciler) expired(ctx context.Context, b *quotav1alpha1.AllowanceBucket, counted map[string]ledger.CountedAt) ([]string, reconcile.Result, error) {
	now := r.now()
	var expire []string
	var next time.Duration
	later := func(d time.Duration) {
		if next == 0 || d < next {
			next = d
		}
	}
	for _, res := range b.Status.Reservations {
		if ledger.IsSum(res.ID) || ledger.IsLease(res.ID) {
			continue // the observer frees these, behind its barrier
		}
		uid, gen, update := ledger.ReservationFor(res.ID)
		if c, ok := counted[uid]; ok && c.Generation >= gen {
			continue // this write folds it
		}
		wait := res.ExpiresAt.Sub(now)
		if wait > 0 && !update {
			// A create's grant may still be on its way to storage.
			later(wait)
			continue
		}
		g := &quotav1alpha1.ResourceGrant{}
		err := r.live.Get(ctx, types.NamespacedName{Namespace: res.Object.Namespace, Name: res.Object.Name}, g)
		gone := apierrors.IsNotFound(err) || (err == nil && string(g.UID) != uid)
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			return nil, reconcile.Result{}, err
		case wait > 0 && !gone:
			// An update of a live grant may still land: held until it
			// expires. One of a grant that is gone never will, and is
			// returned at once (a raise, then a delete before the raise
			// was counted, held its amount for the whole TTL).
			later(wait)
			continue
		case !gone && g.Generation >= gen && g.DeletionTimestamp == nil:
			later(delegationRecheck)
			continue
		}
		expire = append(expire, res.ID)
	}
	return expire, reconcile.Result{RequeueAfter: next}, nil
}
