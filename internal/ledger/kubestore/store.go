// Package kubestore is the ledger's Kubernetes store: each bucket is an
// AllowanceBucket object and its status is the source of truth.
//
// Every write is a status update with the object's resourceVersion, so the
// apiserver's compare-and-swap is the one lock that spans processes: any
// number of Gatekeeper replicas and controllers can write the same bucket and
// none can lose another's update. A conflict re-reads the object and re-runs
// the mutations on the fresh state, with client-go's retry backoff.
//
// Within one process, concurrent Apply calls on the same bucket are batched
// into one status write (group commit, as the in-tree ResourceQuota admission
// batches per namespace): the first caller starts a committer for that
// bucket, which writes everything that queued up while the previous write was
// in flight, releasing each caller as soon as its own batch is written. Under load this turns N contended writes into a handful, which is
// what keeps admission latency flat when many objects of one tenant arrive at
// once.
package kubestore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
)

// DefaultBackoff spaces conflict retries. Several replicas hammering one
// bucket conflict often; each retry re-reads, so it always makes progress,
// and the cap keeps a single Apply bounded (about 10s in the worst case).
var DefaultBackoff = wait.Backoff{Steps: 16, Duration: 5 * time.Millisecond, Factor: 1.6, Jitter: 0.5, Cap: time.Second}

// Options tune a Store.
type Options struct {
	// SystemNamespace holds buckets of cluster-scoped, non-namespace consumers.
	SystemNamespace string
	// Reader serves Get. A manager's cached client makes it an informer
	// read; Apply always reads through the Client it was given,
	// because deciding on a stale bucket would only produce a conflict.
	Reader client.Reader
	// OverLimitIndexed says Reader has OverLimitIndex (IndexOverLimit), so
	// AnyOverLimit can answer from it.
	OverLimitIndexed bool
	// MaxBatch bounds the mutations one status write carries; 1 turns group
	// commit off (one write per mutation), which benchmarks use as baseline.
	MaxBatch int
	// Backoff spaces conflict retries.
	Backoff wait.Backoff
	// Now stamps condition transitions.
	Now func() time.Time
	// IdleQueueTTL is how long a bucket's group-commit queue outlives its
	// last write (default DefaultIdleQueueTTL). The queue keeps the object
	// last written, which saves a GET when the bucket is written again soon;
	// kept forever, every bucket this process ever wrote would stay in
	// memory.
	IdleQueueTTL time.Duration
}

// DefaultIdleQueueTTL outlasts the pauses within a burst of admissions to
// one bucket, so the object read once serves the whole burst.
const DefaultIdleQueueTTL = time.Minute

// Store implements ledger.Store over AllowanceBucket objects.
type Store struct {
	client client.Client
	opts   Options

	mu     sync.Mutex
	queues map[ledger.BucketKey]*queue

	writes    atomic.Int64
	conflicts atomic.Int64
}

var _ ledger.Store = (*Store)(nil)

// queue is the per-bucket group-commit state.
type queue struct {
	pending    []*op
	committing bool
	// last is the object as this process last wrote or read it; it saves a
	// GET per batch when no other process wrote in between (a conflict says
	// when one did).
	last *quotav1alpha1.AllowanceBucket
	// prune drops the queue once it has been idle for IdleQueueTTL; nil
	// while the queue is in use.
	prune *time.Timer
}

type op struct {
	mutate  func(*ledger.Bucket) error
	applied bool
	bucket  ledger.Bucket
	err     error
	done    chan struct{}
}

// New returns a Store that writes through c.
func New(c client.Client, opts Options) *Store {
	if opts.SystemNamespace == "" {
		opts.SystemNamespace = quotav1alpha1.DefaultSystemNamespace
	}
	if opts.Reader == nil {
		opts.Reader = c
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.Backoff.Steps == 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.IdleQueueTTL <= 0 {
		opts.IdleQueueTTL = DefaultIdleQueueTTL
	}
	return &Store{client: c, opts: opts, queues: map[ledger.BucketKey]*queue{}}
}

// Namespace is where the bucket for key lives (v1alpha1.BucketNamespace).
func (s *Store) Namespace(key ledger.BucketKey) string {
	return quotav1alpha1.BucketNamespace(ledgerconv.ConsumerRef(key.Consumer), s.opts.SystemNamespace)
}

// Apply implements ledger.Store with group commit.
func (s *Store) Apply(ctx context.Context, key ledger.BucketKey, mutate func(*ledger.Bucket) error) (ledger.Bucket, error) {
	o := &op{mutate: mutate, done: make(chan struct{})}
	s.mu.Lock()
	q := s.queues[key]
	if q == nil {
		q = &queue{}
		s.queues[key] = q
	}
	if q.prune != nil {
		// If it already fired, it waits for s.mu and then finds the queue
		// in use again.
		q.prune.Stop()
		q.prune = nil
	}
	q.pending = append(q.pending, o)
	if !q.committing {
		q.committing = true
		// The drain runs on its own goroutine rather than on this caller's:
		// under sustained load the queue may not empty for seconds, and a
		// caller that committed for everyone until then would outlive its
		// own admission deadline although its write went out in the first
		// batch. One caller's cancellation must not fail the others' writes
		// in a batch, hence WithoutCancel.
		go s.drain(context.WithoutCancel(ctx), key, q)
	}
	s.mu.Unlock()
	select {
	case <-o.done:
		return o.bucket, o.err
	case <-ctx.Done():
	}
	// The caller's deadline passed (its admission request is over). A
	// mutation still queued is withdrawn and never written; one in the
	// batch being written may still land, so the caller hears that the
	// outcome is unknown and undoes it (ledger.ErrOutcomeUnknown).
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range q.pending {
		if p == o {
			q.pending = append(q.pending[:i:i], q.pending[i+1:]...)
			return ledger.Bucket{}, fmt.Errorf("bucket %s not written: %w", key.Name(), context.Cause(ctx))
		}
	}
	return ledger.Bucket{}, fmt.Errorf("bucket %s: %w: %w", key.Name(), ledger.ErrOutcomeUnknown, context.Cause(ctx))
}

// drain commits q's pending mutations, a batch at a time, until none is
// left. Each caller is released as soon as its batch is written.
func (s *Store) drain(ctx context.Context, key ledger.BucketKey, q *queue) {
	s.mu.Lock()
	for len(q.pending) > 0 {
		n := min(len(q.pending), s.opts.MaxBatch)
		batch := q.pending[:n:n]
		q.pending = q.pending[n:]
		last := q.last
		s.mu.Unlock()
		metrics.Batch(n)
		last = s.commit(ctx, key, last, batch)
		for _, b := range batch {
			close(b.done)
		}
		s.mu.Lock()
		q.last = last
	}
	q.committing = false
	q.prune = time.AfterFunc(s.opts.IdleQueueTTL, func() { s.pruneIdle(key, q) })
	s.mu.Unlock()
}

// pruneIdle drops key's queue q unless a caller has used it since its prune
// timer fired.
func (s *Store) pruneIdle(key ledger.BucketKey, q *queue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queues[key] == q && !q.committing && len(q.pending) == 0 {
		delete(s.queues, key)
	}
}

// commit runs a batch's mutations on the current bucket and writes the result
// in one status update, re-reading and re-running them on conflict. It
// returns the object as stored (nil when unknown), for the next batch.
func (s *Store) commit(ctx context.Context, key ledger.BucketKey, obj *quotav1alpha1.AllowanceBucket, batch []*op) *quotav1alpha1.AllowanceBucket {
	name, namespace := key.Name(), s.Namespace(key)
	cached := obj != nil
	err := retry.OnError(s.opts.Backoff, retriable, func() error {
		var b ledger.Bucket
		for {
			if !cached {
				var err error
				if obj, err = s.read(ctx, namespace, name); err != nil {
					return err
				}
			}
			var refused bool
			b, refused = runBatch(key, obj, batch)
			// A write is checked by compare-and-swap, but a mutation that
			// writes nothing (a refusal, a replay) is only as true as the
			// state it saw: never decide that on the cached object.
			if !refused || !cached {
				break
			}
			cached = false
		}
		cached = false
		if !anyApplied(batch) {
			return nil
		}
		if obj == nil {
			created := &quotav1alpha1.AllowanceBucket{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
					Labels: quotav1alpha1.BucketLabels(ledgerconv.ConsumerRef(key.Consumer))},
				Spec: quotav1alpha1.AllowanceBucketSpec{
					ConsumerRef: ledgerconv.ConsumerRef(key.Consumer), ResourceType: key.ResourceType,
					Dimensions: key.DimensionSet(),
				},
			}
			if len(created.Spec.Dimensions) == 0 {
				created.Spec.Dimensions = nil
			}
			if err := s.client.Create(ctx, created); err != nil {
				return err // AlreadyExists: another writer made it; retry reads it
			}
			obj = created
		}
		out := obj.DeepCopy()
		if err := writeStatus(out, b, metav1.NewTime(s.opts.Now())); err != nil {
			return err
		}
		s.writes.Add(1)
		if err := s.client.Status().Update(ctx, out); err != nil {
			if apierrors.IsConflict(err) {
				s.conflicts.Add(1)
				metrics.WriteConflict()
			}
			return err
		}
		obj = out
		for _, o := range batch {
			if o.applied {
				o.bucket = b
			}
		}
		return nil
	})
	if err != nil {
		for _, o := range batch {
			if o.applied || o.err == nil {
				o.applied, o.err = false, err
			}
		}
		return nil
	}
	return obj
}

// runBatch runs every mutation of a batch in order on the bucket in obj, each
// on the result of the ones before it that succeeded. It reports whether any
// mutation declined (returned an error, so wrote nothing).
func runBatch(key ledger.BucketKey, obj *quotav1alpha1.AllowanceBucket, batch []*op) (ledger.Bucket, bool) {
	b := toBucket(key, obj)
	declined := false
	for _, o := range batch {
		next := b.DeepCopy()
		if o.err = o.mutate(&next); o.err != nil {
			o.applied, o.bucket, declined = false, b.DeepCopy(), true
			continue
		}
		o.applied, b = true, next
	}
	return b, declined
}

func anyApplied(batch []*op) bool {
	for _, o := range batch {
		if o.applied {
			return true
		}
	}
	return false
}

// read fetches the bucket object; nil when it does not exist yet.
func (s *Store) read(ctx context.Context, namespace, name string) (*quotav1alpha1.AllowanceBucket, error) {
	obj := &quotav1alpha1.AllowanceBucket{}
	err := s.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}

// retriable errors re-read the bucket and try again: a write conflict, a
// create that lost the race, a bucket deleted under us, or a server that asked
// us to slow down.
func retriable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
}

// Get implements ledger.Store.
func (s *Store) Get(ctx context.Context, key ledger.BucketKey) (ledger.Bucket, bool, error) {
	obj := &quotav1alpha1.AllowanceBucket{}
	err := s.opts.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace(key), Name: key.Name()}, obj)
	if apierrors.IsNotFound(err) {
		return ledger.Bucket{Key: key}, false, nil
	}
	if err != nil {
		return ledger.Bucket{}, false, err
	}
	return toBucket(key, obj), true, nil
}
