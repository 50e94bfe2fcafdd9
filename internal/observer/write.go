package observer

import (
	"context"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"path"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/counting"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
)

// recheck is how soon an expired reservation whose object exists but was
// not evaluated yet is looked at again.
const recheck = 5 * time.Second

// write writes one bucket's latest observation, with the reservations it
// folds and expires, at most once per WriteInterval, and comes back at
// the earliest expiry of the reservations it keeps.
func (o *Observer) write(ctx context.Context, key ledger.BucketKey) error {
	if o.heldBack(key.ResourceType) {
		// A kind counted into this resource type cannot be read: a sum
		// without it would be too small (access.go). Written again once
		// it can be read.
		return nil
	}
	now := o.opts.Now()
	o.mu.Lock()
	last := o.lastWrite[key]
	o.mu.Unlock()
	if wait := last.Add(o.opts.WriteInterval).Sub(now); wait > 0 {
		o.writes.AddAfter(key, wait)
		return nil
	}
	obj, bucket, exists, err := o.cachedBucket(ctx, key)
	if err != nil {
		return err
	}
	o.mu.Lock()
	notBefore := o.reservationClock.NotBefore(key, bucket, now)
	o.mu.Unlock()
	// Moves are decided first: what their namespaces' objects were counted
	// at by then is in the observation taken after.
	others, moves, waiting, err := o.planMoves(ctx, bucket, notBefore, now)
	if err != nil {
		return err
	}
	others, sums, leaseLapses := splitSums(others, now)
	o.mu.Lock()
	// Sums first: the tally the observation is taken from has everything
	// the barrier that frees them waited for (barrier.go).
	sumPlan := o.planSums(key, sums, now)
	obs, err := o.tally.Observation(key)
	plan := counting.PlanReservations(o.tally, key, others, notBefore, now).With(moves).With(sumPlan).With(counting.Plan{Next: leaseLapses})
	// This write carries every change made to the tally so far.
	since, changed := o.dirtySince[key]
	delete(o.dirtySince, key)
	if changed {
		// Until this write ends, its changes are neither dirty nor
		// written: a recount waits for them (recount.go).
		o.writing[key] = since
		defer func() {
			o.mu.Lock()
			delete(o.writing, key)
			o.mu.Unlock()
		}()
	}
	o.mu.Unlock()
	if err != nil {
		o.stillDirty(key, since, changed)
		return err
	}
	if !exists && obs.Count == 0 {
		return nil // nothing to write into a bucket nobody made
	}
	kept := waiting
	for _, r := range plan.Check {
		live, err := o.lookup(ctx, r.Object)
		if err != nil {
			o.stillDirty(key, since, changed)
			return err
		}
		if counting.Expired(r, live) {
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
		o.stillDirty(key, since, changed)
		return err
	}
	o.recordExpired(obj, bucket, plan.Expire)
	if changed {
		metrics.ObserverLag(time.Since(since))
	}
	switch {
	case kept > 0:
		o.writes.AddAfter(key, recheck)
	case !plan.Next.IsZero():
		o.writes.AddAfter(key, plan.Next.Sub(now))
	}
	return nil
}

// stillDirty puts back the time key's changes have waited since, after a
// write that failed: its retry carries them.
func (o *Observer) stillDirty(key ledger.BucketKey, since time.Time, changed bool) {
	if !changed {
		return
	}
	o.mu.Lock()
	if t, ok := o.dirtySince[key]; !ok || since.Before(t) {
		o.dirtySince[key] = since
	}
	o.mu.Unlock()
}

// cachedBucket returns the bucket and its reservations as the cache has
// them, and whether the bucket exists there.
func (o *Observer) cachedBucket(ctx context.Context, key ledger.BucketKey) (*quotav1alpha1.AllowanceBucket, []ledger.Reservation, bool, error) {
	obj := &quotav1alpha1.AllowanceBucket{}
	nn := types.NamespacedName{
		Namespace: quotav1alpha1.BucketNamespace(ledgerconv.ConsumerRef(key.Consumer), o.opts.SystemNamespace),
		Name:      key.Name(),
	}
	if err := o.cache.Get(ctx, nn, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, false, nil
		}
		return nil, nil, false, err
	}
	return obj, reservationsOf(obj), true, nil
}

// reservationsOf is a bucket's reservations as the ledger holds them.
func reservationsOf(b *quotav1alpha1.AllowanceBucket) []ledger.Reservation {
	out := make([]ledger.Reservation, 0, len(b.Status.Reservations))
	for _, r := range b.Status.Reservations {
		out = append(out, ledger.Reservation{ClaimID: r.ID, Object: ledgerconv.Object(r.Object), Amount: r.Amount, Total: r.Total, ExpiresAt: r.ExpiresAt.Time})
	}
	return out
}

// recordExpired records an Event on the bucket for each reservation just
// expired: quota an admission held for an object that never came to count
// (a request a later webhook rejected, a client that gave up), which an
// administrator otherwise sees only as quota that was briefly unavailable.
func (o *Observer) recordExpired(obj *quotav1alpha1.AllowanceBucket, reservations []ledger.Reservation, expired []string) {
	if obj == nil || len(expired) == 0 {
		return
	}
	gone := sets.New(expired...)
	for _, r := range reservations {
		if gone.Has(r.ClaimID) {
			ref := r.Object
			o.recorder.Eventf(obj, nil, corev1.EventTypeWarning, reasonReservationExpired, "Expire",
				"reservation %s of %d for %s %s expired: the object was never counted (its request failed after admission, or a later update was rejected)",
				r.ClaimID, r.Amount, ref.Kind, path.Join(ref.Namespace, ref.Name))
		}
	}
}

// reasonReservationExpired is the reason of the Event recordExpired records.
const reasonReservationExpired = "ReservationExpired"

// lookup reads a reservation's object from the API server (a lagging cache
// would expire reservations of objects just created).
func (o *Observer) lookup(ctx context.Context, ref ledger.ObjectRef) (counting.Live, error) {
	gk := schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
	o.mu.Lock()
	_, watched := o.watched[gk]
	o.mu.Unlock()
	if gk == claimGVK.GroupKind() {
		watched = true
	}
	live := counting.Live{Watched: watched}
	obj := &metav1.PartialObjectMetadata{}
	found, err := o.liveGet(ctx, ref, obj)
	if !found {
		return live, err
	}
	live.Exists, live.UID, live.Generation = true, string(obj.GetUID()), obj.GetGeneration()
	return live, nil
}
