package observer

// Freeing sums (docs/design/leases.md). A bucket that gathers more create
// reservations than it may hold (the manager away, the observer behind)
// compacts the oldest into a sum: an amount, with no uids (ledger.IsSum).
// A sum cannot be folded object by object; it is freed once every object
// behind it is counted, which the observer proves with a barrier:
//
//   - every create behind a sum was admitted before the observer first saw
//     the sum (at s), so it reached etcd before s + SumBarrier, more than the
//     API server's request timeout, or never will;
//   - at a time t ≥ s + SumBarrier the observer reads the cluster's revision
//     R; every such create is stored at a revision ≤ R;
//   - the tally has taken in everything up to R once, for every counted
//     kind, its informers' handlers have delivered every object stored at a
//     revision ≤ R, and then no evaluation queued before that is still
//     pending. A watch delivers a kind's events in revision order, so a
//     handler that delivered revision d delivered everything before it. A
//     kind is caught up when its informer has synced past R and its handler
//     delivered R or everything its store holds (cheap, and true of a busy
//     kind at once); a quiet kind's informer may not hear of R until the
//     next watch bookmark (a minute), so failing that, a list of the
//     kind's metadata at a revision not older than R decides: every object
//     listed was delivered at its listed revision (one created before R and
//     changed since is listed at the later revision, so that revision, not
//     only those up to R, must have been delivered). Only a delete can be
//     undelivered then, and it only over-counts.
//
// A write whose tally was taken after that counts every object behind the
// sum that exists, and frees the sum in the same write (Observation.Fold),
// as a fold keeps the window closed. Until then the sum's objects are
// counted twice once the observer has them: near the limit a create may be
// refused that would fit; none is admitted past it.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/counting"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

const (
	// barrierPoll is how often the barrier loop looks for sums waiting, and
	// how often a barrier in progress checks the informers and the queue.
	barrierPoll = time.Second
	// barrierTimeout bounds one barrier: one that does not pass by then is
	// tried again from a new revision (a kind whose informer is stuck keeps
	// every sum held: fail closed).
	barrierTimeout = 2 * time.Minute
	// barrierList is the least time between two lists of one kind by a
	// barrier: a list of a large kind is costly, and a quiet kind only
	// needs one.
	barrierList = 10 * time.Second
)

// sumState is what the observer keeps about sums. Guarded by Observer.mu.
type sumState struct {
	// clock: when the observer first saw each sum, plus SumBarrier: the
	// earliest revision-read time a barrier freeing it may start from.
	clock *counting.ReservationClock
	// passed is the revision-read time of the last barrier passed.
	passed time.Time
	// wanted is the earliest time a waiting sum may be freed from; zero
	// when none waits.
	wanted time.Time
	// waiting: the buckets holding sums the last barrier did not free,
	// written again after the next.
	waiting map[ledger.BucketKey]bool
	// sources: one per informer of a counted kind, whose delivery the
	// barrier checks.
	sources []*barrierSource
}

func newSumState(barrier time.Duration) sumState {
	return sumState{clock: counting.NewReservationClock(barrier), waiting: map[ledger.BucketKey]bool{}}
}

// barrierSource is one informer of a counted kind and the highest
// resourceVersion its handler has delivered.
type barrierSource struct {
	kind string
	gvk  schema.GroupVersionKind
	// informer is set once it has synced; until then no barrier passes.
	informer  atomic.Pointer[toolscache.SharedIndexInformer]
	delivered atomic.Uint64
	// listed: when caughtUp last listed the kind (only the barrier loop
	// touches it).
	listed time.Time
}

// setInformer records the source's informer, which must be client-go's
// shared informer (controller-runtime's caches hand it out as is).
func (s *barrierSource) setInformer(inf cache.Informer) error {
	shared, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return fmt.Errorf("the informer of %s is a %T, not a client-go shared informer: the barrier that frees sums could not read it", s.kind, inf)
	}
	s.informer.Store(&shared)
	return nil
}

// saw records that the handler delivered obj.
func (s *barrierSource) saw(obj client.Object) {
	rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	for {
		cur := s.delivered.Load()
		if rv <= cur || s.delivered.CompareAndSwap(cur, rv) {
			return
		}
	}
}

// caughtUp reports whether the handler has delivered every object stored
// up to revision r: from the informer when it can tell, else from a quorum
// list of the kind's metadata.
func (s *barrierSource) caughtUp(ctx context.Context, live client.Reader, r uint64) (bool, error) {
	if s.informerCaughtUp(r) {
		return true, nil
	}
	if s.informer.Load() == nil || time.Since(s.listed) < barrierList {
		return false, nil
	}
	s.listed = time.Now()
	delivered := s.delivered.Load()
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(s.gvk.GroupVersion().WithKind(s.gvk.Kind + "List"))
	// Not older than r: the API server answers from its watch cache once
	// that has reached r (a quorum list of a kind of 250,000 objects,
	// 500 at a time from etcd, outlasted barrierTimeout under load).
	opts := &client.ListOptions{Limit: 500, Raw: &metav1.ListOptions{
		ResourceVersion:      strconv.FormatUint(r, 10),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
	}}
	for {
		if err := live.List(ctx, list, opts); err != nil {
			if apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
				return false, nil // its watch cache not at r yet: the next try
			}
			return false, fmt.Errorf("listing %s: %w", s.kind, err)
		}
		// A watch bookmark past r may arrive while a long list pages.
		if s.informerCaughtUp(r) {
			return true, nil
		}
		for i := range list.Items {
			rv, err := strconv.ParseUint(list.Items[i].GetResourceVersion(), 10, 64)
			if err != nil {
				return false, fmt.Errorf("%s %s: resourceVersion %q is not a number", s.kind, list.Items[i].GetName(), list.Items[i].GetResourceVersion())
			}
			// Newer than what the handler delivered: it may have been
			// created before r and changed since, its create undelivered
			// too. A quiet kind's handler soon has it.
			if rv > delivered {
				return false, nil
			}
		}
		if list.GetContinue() == "" {
			return true, nil
		}
		opts = &client.ListOptions{Limit: 500, Continue: list.GetContinue()}
	}
}

// informerCaughtUp: the informer has synced past r and its handler has
// delivered r or everything its store holds.
func (s *barrierSource) informerCaughtUp(r uint64) bool {
	p := s.informer.Load()
	if p == nil {
		return false
	}
	inf := *p
	last, err := strconv.ParseUint(inf.LastSyncResourceVersion(), 10, 64)
	if err != nil || last < r {
		return false
	}
	delivered := s.delivered.Load()
	if delivered >= r {
		return true
	}
	for _, x := range inf.GetStore().List() {
		obj, ok := x.(client.Object)
		if !ok {
			return false
		}
		rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
		if err != nil || rv > delivered {
			return false
		}
	}
	return true
}

// addBarrierSource registers a counted kind's informer before its handler
// is added (watchMatchedKinds): the handler calls saw for every object it
// delivers, the initial list's included.
func (o *Observer) addBarrierSource(gvk schema.GroupVersionKind) *barrierSource {
	s := &barrierSource{kind: gvk.GroupKind().String(), gvk: gvk}
	o.mu.Lock()
	o.sums.sources = append(o.sums.sources, s)
	o.mu.Unlock()
	return s
}

// removeBarrierSource forgets a source whose informer did not start. A
// copy: a barrier in progress iterates the slice it read.
func (o *Observer) removeBarrierSource(s *barrierSource) {
	o.mu.Lock()
	o.sums.sources = slices.DeleteFunc(slices.Clone(o.sums.sources), func(x *barrierSource) bool { return x == s })
	o.mu.Unlock()
}

// splitSums takes a bucket's sums out of its reservations, with the
// capacity leases that lapsed (ledger.LeaseLapsed): a crashed holder may have
// admitted all of one without recording, so it is freed behind the barrier
// like a sum, its clock starting when the observer first sees it lapsed. A
// lease still held is neither folded nor expired (its holder records and
// renews it); leaseLapses is when the first of those lapses, for the write
// to come back then (zero: none).
func splitSums(reservations []ledger.Reservation, now time.Time) (rest, sums []ledger.Reservation, leaseLapses time.Time) {
	for _, r := range reservations {
		switch {
		case ledger.IsSum(r.ClaimID), ledger.LeaseLapsed(r, now):
			sums = append(sums, r)
		case ledger.IsLease(r.ClaimID):
			if at := r.ExpiresAt.Add(ledger.LeaseSkew); leaseLapses.IsZero() || at.Before(leaseLapses) {
				leaseLapses = at
			}
		default:
			rest = append(rest, r)
		}
	}
	return rest, sums, leaseLapses
}

// planSums folds the sums the last barrier covers; the others wait for the
// next, which comes once the earliest of them may be freed. The caller
// holds o.mu and takes the observation after it: a barrier passed before
// then has its objects in the tally that observation is taken from.
func (o *Observer) planSums(key ledger.BucketKey, sums []ledger.Reservation, now time.Time) counting.Plan {
	var p counting.Plan
	from := o.sums.clock.NotBefore(key, sums, now)
	delete(o.sums.waiting, key)
	for _, s := range sums {
		at := from[s.ClaimID]
		if !o.sums.passed.IsZero() && !o.sums.passed.Before(at) {
			p.Fold = append(p.Fold, s.ClaimID)
			continue
		}
		o.sums.waiting[key] = true
		if o.sums.wanted.IsZero() || at.Before(o.sums.wanted) {
			o.sums.wanted = at
		}
	}
	return p
}

// freeSums passes a barrier whenever a sum waits for one and it is time,
// then writes the buckets that wait, until ctx ends.
func (o *Observer) freeSums(ctx context.Context) {
	ticker := time.NewTicker(barrierPoll)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		o.mu.Lock()
		wanted := o.sums.wanted
		o.mu.Unlock()
		if wanted.IsZero() || o.opts.Now().Before(wanted) {
			continue
		}
		at, err := o.passBarrier(ctx)
		if err != nil {
			if ctx.Err() == nil {
				o.log.Error(err, "passing the barrier that frees sums; they stay reserved (fail closed) and it is tried again")
			}
			continue
		}
		o.mu.Lock()
		o.sums.passed = at
		if !o.sums.wanted.After(at) {
			o.sums.wanted = time.Time{}
		}
		var keys []ledger.BucketKey
		for k := range o.sums.waiting {
			keys = append(keys, k)
		}
		o.mu.Unlock()
		o.log.Info("barrier passed: sums first seen before it may be freed", "at", at, "buckets", len(keys))
		for _, k := range keys {
			o.writes.Add(k)
		}
	}
}

// passBarrier reads the cluster's revision and waits until the tally has
// taken in everything stored up to it; it returns when the revision was
// read, on the observer's clock.
func (o *Observer) passBarrier(ctx context.Context) (time.Time, error) {
	at := o.opts.Now()
	r, err := o.currentRevision(ctx)
	if err != nil {
		return time.Time{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, barrierTimeout)
	defer cancel()
	o.mu.Lock()
	sources := o.sums.sources
	o.mu.Unlock()
	for _, s := range sources {
		if err := o.waitFor(ctx, func() (bool, string, error) {
			ok, err := s.caughtUp(ctx, o.live, r)
			return ok, s.kind, err
		}); err != nil {
			return time.Time{}, fmt.Errorf("counted kinds at revision %d: %w", r, err)
		}
	}
	// Arrival times are on the wall clock (Observer.event).
	delivered := time.Now()
	if err := o.waitFor(ctx, func() (bool, string, error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		for it, t := range o.eventAt {
			if !t.After(delivered) {
				return false, it.ref(), nil
			}
		}
		return true, "", nil
	}); err != nil {
		return time.Time{}, fmt.Errorf("evaluations queued before revision %d was delivered: %w", r, err)
	}
	return at, nil
}

// waitFor polls done until it holds, fails, or ctx ends; the error names
// what was still waited for.
func (o *Observer) waitFor(ctx context.Context, done func() (bool, string, error)) error {
	for {
		ok, what, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still waiting for %s: %w", what, ctx.Err())
		case <-time.After(barrierPoll):
		}
	}
}

// currentRevision is the cluster's revision now: a quorum list of one
// bucket, metadata only, from the API server.
func (o *Observer) currentRevision(ctx context.Context) (uint64, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(quotav1alpha1.GroupVersion.WithKind("AllowanceBucketList"))
	if err := o.live.List(ctx, list, client.Limit(1)); err != nil {
		return 0, fmt.Errorf("reading the cluster's revision: %w", err)
	}
	r, err := strconv.ParseUint(list.GetResourceVersion(), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the cluster's revision %q is not a number: sums cannot be freed on this storage", list.GetResourceVersion())
	}
	return r, nil
}
