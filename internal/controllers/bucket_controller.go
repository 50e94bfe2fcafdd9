package controllers

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/grants"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// +kubebuilder:rbac:groups=quota.miloapis.com,resources=allowancebuckets,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=quota.miloapis.com,resources=allowancebuckets/status,verbs=get;update;patch

// bucketRequest is one bucket, or (Fanout) every bucket of Key's consumer
// and resource type plus those their grants pre-create; Key.Dimensions is
// then unused. Grant changes arrive per consumer and resource type, and
// which buckets exist is a cache read the reconciler makes, not the event
// source.
type bucketRequest struct {
	Key    ledger.BucketKey
	Fanout bool
}

// bucketReconciler keeps each AllowanceBucket's limit true: its limit is
// what the mirrored grants give it, and grants pre-create the buckets they
// pin down. Its usage is the observer's, not this controller's. It writes
// only through the ledger.
type bucketReconciler struct {
	client          client.Client
	events          events.EventRecorder
	ledger          *ledger.Ledger
	mirror          *grants.Mirror
	systemNamespace string
}

func (r *bucketReconciler) setup(mgr ctrl.Manager) error {
	r.events = mgr.GetEventRecorder("quotakeeper-bucket")
	return builder.TypedControllerManagedBy[bucketRequest](mgr).
		Named("bucket").
		Watches(&quotav1alpha1.AllowanceBucket{}, handler.TypedEnqueueRequestsFromMapFunc(
			func(_ context.Context, o client.Object) []bucketRequest {
				return []bucketRequest{{Key: ledgerconv.KeyOf(o.(*quotav1alpha1.AllowanceBucket))}}
			})).
		// Also holds the workers until the mirror has synced.
		WatchesRawSource(grants.Source(r.mirror, func(_ context.Context, c grants.Change) []bucketRequest {
			return []bucketRequest{{Key: ledger.BucketKey{Consumer: c.Consumer, ResourceType: c.ResourceType}, Fanout: true}}
		})).
		Complete(r)
}

func (r *bucketReconciler) Reconcile(ctx context.Context, req bucketRequest) (reconcile.Result, error) {
	if !req.Fanout {
		return reconcile.Result{}, r.reconcileBucket(ctx, req.Key)
	}
	keys := precreatedKeys(r.mirror.GrantsFor(req.Key.Consumer, req.Key.ResourceType))
	var buckets quotav1alpha1.AllowanceBucketList
	if err := r.client.List(ctx, &buckets, client.MatchingFields{indexBucketPair: pairKey(req.Key.Consumer, req.Key.ResourceType)}); err != nil {
		return reconcile.Result{}, err
	}
	for i := range buckets.Items {
		keys = append(keys, ledgerconv.KeyOf(&buckets.Items[i]))
	}
	var errs []error
	done := map[ledger.BucketKey]bool{}
	for _, k := range keys {
		if !done[k] {
			done[k] = true
			errs = append(errs, r.reconcileBucket(ctx, k))
		}
	}
	return reconcile.Result{}, errors.Join(errs...)
}

func (r *bucketReconciler) reconcileBucket(ctx context.Context, key ledger.BucketKey) error {
	obj := &quotav1alpha1.AllowanceBucket{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: quotav1alpha1.BucketNamespace(ledgerconv.ConsumerRef(key.Consumer), r.systemNamespace), Name: key.Name()}, obj)
	switch {
	case apierrors.IsNotFound(err):
		obj = nil
	case err != nil:
		return err
	}
	limit, contribs, err := r.ledger.Limit(key)
	if err != nil {
		return err
	}
	if limitRecorded(obj, limit, contribs) {
		return nil // the common case: decided from the cache alone
	}
	// Writes the new limit; creates the bucket only if a grant applies.
	b, err := r.ledger.Refresh(ctx, key)
	if err != nil || obj == nil {
		return err
	}
	r.recordLimitChange(obj, b)
	return nil
}

// recordLimitChange records an Event on the bucket when its new limit puts
// it over what its objects already use, or back within it: the moment an
// administrator lowering a grant needs to hear that nothing more will be
// admitted. (Usage growing past the limit is the observer's to see.)
func (r *bucketReconciler) recordLimitChange(before *quotav1alpha1.AllowanceBucket, after ledger.Bucket) {
	u, err := after.Usage()
	if err != nil {
		return
	}
	wasOver, isOver := before.Status.Allocated > before.Status.Limit, u.Allocated > u.Limit
	switch {
	case isOver && !wasOver:
		r.events.Eventf(before, nil, corev1.EventTypeWarning, quotav1alpha1.ReasonLimitLowered, actionSetLimit,
			"limit lowered to %d, below the %d allocated: nothing more is admitted until usage falls below it", u.Limit, u.Allocated)
	case wasOver && !isOver:
		r.events.Eventf(before, nil, corev1.EventTypeNormal, quotav1alpha1.ReasonWithinLimit, actionSetLimit,
			"limit raised to %d: allocated %d is within it again", u.Limit, u.Allocated)
	}
}

// limitRecorded reports whether a bucket (nil: absent) already records
// limit and contribs, as the store renders them; an absent bucket that no
// grant applies to records "nothing" correctly.
func limitRecorded(obj *quotav1alpha1.AllowanceBucket, limit int64, contribs []ledger.GrantContribution) bool {
	if obj == nil {
		return limit == 0 && len(contribs) == 0
	}
	refs := obj.Status.ContributingGrantRefs
	if obj.Status.Limit != limit || len(refs) != len(contribs) {
		return false
	}
	for i, c := range contribs {
		ref := refs[i]
		if ledger.GrantID(ref.Namespace, ref.Name, int(ref.BucketIndex)) != c.GrantID || ref.Amount != c.Amount || ref.ObservedGeneration != c.Generation {
			return false
		}
	}
	return true
}
