package observer

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotakeeper/quotakeeper/api/ledgerconv"
	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/ledger"
)

// recheck is how soon an expired reservation whose object exists but was
// not evaluated yet is looked at again.
const recheck = 5 * time.Second

// write writes one bucket's latest observation, with the reservations it
// folds and expires, at most once per WriteInterval, and comes back at
// the earliest expiry of the reservations it keeps.
func (o *Observer) write(ctx context.Context, key ledger.BucketKey) error {
	now := o.opts.Now()
	o.mu.Lock()
	last := o.lastWrite[key]
	o.mu.Unlock()
	if wait := last.Add(o.opts.WriteInterval).Sub(now); wait > 0 {
		o.writes.AddAfter(key, wait)
		return nil
	}
	bucket, exists, err := o.cachedBucket(ctx, key)
	if err != nil {
		return err
	}
	o.mu.Lock()
	obs, err := o.tally.Observation(key)
	plan := PlanReservations(o.tally, key, bucket, now)
	o.mu.Unlock()
	if err != nil {
		return err
	}
	if !exists && obs.Count == 0 {
		return nil // nothing to write into a bucket nobody made
	}
	kept := 0
	for _, r := range plan.Check {
		live, err := o.lookup(ctx, r.Object)
		if err != nil {
			return err
		}
		if Expired(r, live) {
			plan.Expire = append(plan.Expire, r.ClaimID)
		} else {
			kept++
		}
	}
	obs.Fold, obs.Expire = plan.Fold, plan.Expire
	o.mu.Lock()
	o.lastWrite[key] = now
	o.mu.Unlock()
	if _, err := o.opts.Writer.Observe(ctx, key, obs); err != nil {
		return err
	}
	switch {
	case kept > 0:
		o.writes.AddAfter(key, recheck)
	case !plan.Next.IsZero():
		o.writes.AddAfter(key, plan.Next.Sub(now))
	}
	return nil
}

// cachedBucket returns the bucket's reservations as the cache has them, and
// whether the bucket exists there.
func (o *Observer) cachedBucket(ctx context.Context, key ledger.BucketKey) ([]ledger.Reservation, bool, error) {
	obj := &quotav1alpha1.AllowanceBucket{}
	nn := types.NamespacedName{
		Namespace: quotav1alpha1.BucketNamespace(ledgerconv.ConsumerRef(key.Consumer), o.opts.SystemNamespace),
		Name:      key.Name(),
	}
	if err := o.cache.Get(ctx, nn, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	out := make([]ledger.Reservation, 0, len(obj.Status.Reservations))
	for _, r := range obj.Status.Reservations {
		out = append(out, ledger.Reservation{ClaimID: r.ID, Object: ledgerconv.Object(r.Object), Amount: r.Amount, ExpiresAt: r.ExpiresAt.Time})
	}
	return out, true, nil
}

// lookup reads a reservation's object from the API server (a lagging cache
// would expire reservations of objects just created).
func (o *Observer) lookup(ctx context.Context, ref ledger.ObjectRef) (Live, error) {
	gk := schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
	o.mu.Lock()
	_, watched := o.watched[gk]
	o.mu.Unlock()
	if gk == claimGVK.GroupKind() {
		watched = true
	}
	live := Live{Watched: watched}
	mapping, err := o.mapper.RESTMapping(gk)
	if meta.IsNoMatchError(err) {
		return live, nil // no such kind any more: no such object
	}
	if err != nil {
		return Live{}, err
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(mapping.GroupVersionKind)
	namespace := ref.Namespace
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		namespace = ""
	}
	if err := o.live.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return live, nil
		}
		return Live{}, err
	}
	live.Exists, live.UID, live.Generation = true, string(obj.GetUID()), obj.GetGeneration()
	return live, nil
}
