package observer

// Folding while the observer rebuilds. After a start, nothing is written
// until every object is evaluated (a bucket written from a partial tally
// would count less than the live objects use), which at 100,000 objects is
// a minute; meanwhile admission goes on reserving, and the reservations
// would gather in the buckets for as long as the rebuild lasts (at 390
// creates a second, beyond etcd's object size limit). So while it rebuilds
// the observer folds the create reservations it finds, each on top of the
// bucket's figures as last written (ledger.FoldCreated: a create
// reservation's presence proves its object is not in them), and expires
// those whose object never came; a create made at the manager's start is
// counted within a fold interval.

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/counting"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// rebuildFoldInterval is how often foldWhileRebuilding looks at the buckets.
const rebuildFoldInterval = 250 * time.Millisecond

// foldWhileRebuilding folds and expires create reservations until done is
// closed (the observer is ready: its own writes take over). The policy must
// be loaded: objects are evaluated under it.
func (o *Observer) foldWhileRebuilding(ctx context.Context, done <-chan struct{}) {
	ticker := time.NewTicker(rebuildFoldInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-ticker.C:
		}
		buckets := &quotav1alpha1.AllowanceBucketList{}
		if err := o.cache.List(ctx, buckets); err != nil {
			o.log.Error(err, "listing buckets to fold while rebuilding")
			continue
		}
		for i := range buckets.Items {
			b := &buckets.Items[i]
			if len(b.Status.Reservations) == 0 {
				continue
			}
			select {
			case <-done:
				return
			default:
			}
			if err := o.foldCreated(ctx, b); err != nil {
				o.log.Error(err, "folding while rebuilding", "bucket", b.Name)
			}
		}
	}
}

// foldCreated folds one bucket's create reservations whose object exists
// and is evaluated, and expires those past their expiry with no object.
func (o *Observer) foldCreated(ctx context.Context, b *quotav1alpha1.AllowanceBucket) error {
	key := ledgerconv.KeyOf(b)
	if o.heldBack(key.ResourceType) {
		return nil
	}
	reservations := reservationsOf(b)
	now := o.opts.Now()
	o.mu.Lock()
	notBefore := o.reservationClock.NotBefore(key, reservations, now)
	o.mu.Unlock()
	var created []ledger.Created
	var expire []string
	for _, r := range reservations {
		if _, _, move := ledger.NamespaceMoveFor(r.ClaimID); move {
			continue // its objects are counted by the rebuild's own write (move.go)
		}
		if ledger.IsSum(r.ClaimID) || ledger.IsLease(r.ClaimID) {
			continue // freed only behind a barrier (barrier.go)
		}
		uid, _, update := ledger.ReservationFor(r.ClaimID)
		if update {
			continue // the object is in allocated at an older amount: Observe's
		}
		u, err := o.liveObject(ctx, r.Object)
		if err != nil {
			return err
		}
		if u == nil || string(u.GetUID()) != uid {
			if !now.Before(counting.ExpiresAt(r, notBefore)) {
				expire = append(expire, r.ClaimID)
			}
			continue
		}
		it, amounts, ok, err := o.counts(ctx, u)
		if err != nil || !ok {
			continue // the rebuild's own write decides
		}
		// In the tally before the fold: the first write after the rebuild
		// sets allocated from the tally, and must count what was folded
		// even if the object's own event is still queued.
		o.record(it, counting.Object{UID: uid, Generation: u.GetGeneration(), Namespace: u.GetNamespace(), Amounts: amounts})
		created = append(created, ledger.Created{UID: uid, Generation: u.GetGeneration(), Namespace: u.GetNamespace(), Amount: amounts[key]})
	}
	if len(created) == 0 && len(expire) == 0 {
		return nil
	}
	_, err := o.opts.Writer.FoldCreated(ctx, key, created, expire)
	if err == nil {
		o.recordExpired(b, reservations, expire)
	}
	return err
}

// liveObject reads a reservation's object whole from the API server (the
// informers may not have listed it yet); nil when there is none.
func (o *Observer) liveObject(ctx context.Context, ref ledger.ObjectRef) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	found, err := o.liveGet(ctx, ref, u)
	if !found {
		return nil, err
	}
	return u, nil
}

// liveGet reads the object ref names from the API server into obj, typed
// by ref's kind; found is false when there is none (or no such kind).
func (o *Observer) liveGet(ctx context.Context, ref ledger.ObjectRef, obj client.Object) (found bool, err error) {
	mapping, err := o.mapper.RESTMapping(schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	namespace := ref.Namespace
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		namespace = ""
	}
	obj.GetObjectKind().SetGroupVersionKind(mapping.GroupVersionKind)
	if err := o.live.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// counts evaluates u under the loaded policy and returns its item and
// what it counts, and whether every constraint could count it (an object
// one cannot count is left to the rebuild, which keeps what it counted).
func (o *Observer) counts(ctx context.Context, u *unstructured.Unstructured) (item, map[ledger.BucketKey]int64, bool, error) {
	gvk := u.GroupVersionKind()
	it := item{kind: itemObject, gvk: gvk, namespace: u.GetNamespace(), name: u.GetName()}
	mapping, err := o.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return it, nil, false, err
	}
	var ns *corev1.Namespace
	if u.GetNamespace() != "" {
		if ns = o.cachedNamespace(ctx, u.GetNamespace()); ns == nil {
			return it, nil, false, nil // its consumers may be named by its namespace's labels
		}
	}
	claims, violations, err := o.policy.evaluate(ctx, u, mapping, ns)
	if err != nil || len(violations) > 0 {
		return it, nil, false, err
	}
	amounts, err := recordedAmounts(claims)
	if err != nil {
		return it, nil, false, err
	}
	return it, amounts, true, nil
}
