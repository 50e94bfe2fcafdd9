package observer

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/client-go/tools/events"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/claimpolicies"
	"github.com/quotakeeper/quotakeeper/internal/counted"
	"github.com/quotakeeper/quotakeeper/internal/counting"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
)

// Writer writes a bucket's observation; *ledger.Ledger is one.
type Writer interface {
	Observe(ctx context.Context, key ledger.BucketKey, obs ledger.Observation) (ledger.Bucket, error)
	// FoldCreated folds create reservations while the observer rebuilds
	// (rebuild.go).
	FoldCreated(ctx context.Context, key ledger.BucketKey, created []ledger.Created, expire []string) (ledger.Bucket, error)
}

// Options configure an Observer.
type Options struct {
	// Writer writes the observations. Required.
	Writer Writer
	// WriterSynced reports whether the writer may write (the grant mirror
	// behind its limits has synced). Default: always.
	WriterSynced func() bool
	// SystemNamespace holds the buckets of consumers that are neither a
	// namespace nor inside one. Default v1alpha1.DefaultSystemNamespace.
	SystemNamespace string
	// Resync is how often every object is evaluated again. Default 5m.
	Resync time.Duration
	// WriteInterval is the least time between two writes of one bucket.
	// Default 250ms.
	WriteInterval time.Duration
	// Workers evaluate objects at once. Default 4.
	Workers int
	// Now is the clock reservations expire by. Default time.Now.
	Now func() time.Time
	// MinReservationAge is how long the observer must itself have seen a
	// reservation before it may expire it, whatever its expiresAt says
	// (ReservationClock). Default ledger.MinReservationTTL; tests that
	// expire reservations on purpose set less.
	MinReservationAge time.Duration
	// SumBarrier is how long after the observer first saw a sum (create
	// reservations a bucket compacted while nothing folded them, package
	// ledger) every object behind it has reached etcd or never will: more
	// than the API server's request timeout (default 60s). A sum is freed
	// only by a write whose tally has taken in everything stored by then
	// (barrier.go). Default 70s.
	SumBarrier time.Duration
	// ObjectClaims writes a ResourceClaim view of every counted object
	// (views.go): the manager's --object-claims, on by default there.
	ObjectClaims bool
	// ObjectClaimsQPS bounds the view writes per second, through a client
	// of their own so they never slow bucket writes or the claim
	// controller. Default 20.
	ObjectClaimsQPS float32
	// ClaimPolicies are the ClaimCreationPolicies quota.policy_claim
	// renders, when the process already watches them (the manager serving
	// the External Data provider hands its builtins the same set); nil:
	// the observer watches its own from mgr's cache.
	ClaimPolicies *claimpolicies.Set
}

func (o *Options) defaults() {
	if o.SystemNamespace == "" {
		o.SystemNamespace = quotav1alpha1.DefaultSystemNamespace
	}
	if o.Resync <= 0 {
		o.Resync = 5 * time.Minute
	}
	if o.WriteInterval <= 0 {
		o.WriteInterval = 250 * time.Millisecond
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MinReservationAge <= 0 {
		o.MinReservationAge = ledger.MinReservationTTL
	}
	if o.WriterSynced == nil {
		o.WriterSynced = func() bool { return true }
	}
	if o.SumBarrier <= 0 {
		o.SumBarrier = 70 * time.Second
	}
	if o.ObjectClaimsQPS <= 0 {
		o.ObjectClaimsQPS = 20
	}
}

// itemKind says what an event names.
type itemKind int

const (
	itemTemplate itemKind = iota
	itemConstraint
	itemObject
	itemNamespace
	itemClaim
	itemResync
)

// item is one unit of the evaluation queue.
type item struct {
	kind      itemKind
	gvk       schema.GroupVersionKind // constraint and object kinds
	namespace string
	name      string
}

// ref names an object in the tally.
func (i item) ref() string {
	return fmt.Sprintf("%s/%s/%s", i.gvk.GroupKind(), i.namespace, i.name)
}

var claimGVK = quotav1alpha1.GroupVersion.WithKind("ResourceClaim")

// Observer keeps every bucket's observed usage equal to the live objects
// (package doc). It is a leader-only manager Runnable.
type Observer struct {
	opts  Options
	cache cache.Cache
	// objects is the cache of the kinds constraints match, the observer's
	// own: its transform (uncounted) keeps only the metadata of an object
	// no constraint matches, which no other reader of the manager's cache
	// would expect.
	objects  cache.Cache
	client   client.Client // access reviews
	live     client.Reader // expiry look-ups must not trust a lagging cache
	mapper   meta.RESTMapper
	policy   *policy
	log      logr.Logger
	recorder events.EventRecorder

	// The queues of the evaluate and write controllers (controllers.go),
	// made by Start.
	events workqueue.TypedRateLimitingInterface[item]
	writes workqueue.TypedRateLimitingInterface[ledger.BucketKey]
	ready  atomic.Bool
	// rebuilt is closed once ready: foldWhileRebuilding stops.
	rebuilt chan struct{}
	// loadingConstraints: initialLoad is loading the constraints, and
	// their matched kinds are watched once all are loaded (so folding
	// starts before a large kind's informer has listed).
	loadingConstraints atomic.Bool

	// ResourceClaim views (nil views: off); viewQueue is the views
	// controller's.
	viewQueue  workqueue.TypedRateLimitingInterface[types.NamespacedName]
	viewClient client.Client
	views      *viewSet // guarded by mu

	// watching serializes watchMatchedKinds and guards listing, the
	// informers of counted kinds whose first list has not ended (taken
	// before mu, never under it).
	watching sync.Mutex
	listing  map[listingKey]*listingInformer

	mu        sync.Mutex
	tally     *counting.Tally
	known     map[string]item                        // tally refs
	stamps    map[string]stamp                       // what each tally ref was evaluated from
	watched   map[schema.GroupKind]*meta.RESTMapping // kinds with an informer
	whole     map[schema.GroupKind]bool              // watched kinds informed whole, not as metadata
	blind     map[schema.GroupKind]error             // matched kinds the manager may not read (access.go)
	held      heldTypes                              // resource types not written meanwhile
	informed  map[schema.GroupVersionKind]bool       // informers with our handler
	lastWrite map[ledger.BucketKey]time.Time
	// reservationClock: when this observer first saw each reservation.
	reservationClock *counting.ReservationClock
	// sums: when the observer first saw each sum (plus SumBarrier), the
	// barrier last passed and which buckets wait for the next (barrier.go).
	sums sumState
	// For the observer lag metric: when each queued object or claim event
	// arrived, and since when each bucket has had a change to write.
	eventAt    map[item]time.Time
	dirtySince map[ledger.BucketKey]time.Time
	// writing: the buckets being written, since when their changes waited.
	writing map[ledger.BucketKey]time.Time

	// Recounting (recount.go): every quota constraint's version by
	// counted.Key, those not yet counted, the versions stamped by the
	// observer, and the record last published (read at start, then
	// touched by Start's loop only).
	versions  map[string]string
	recounts  map[string]*recount
	stamped   map[string]string
	published counted.Record

	// skipNameValidation is the manager's setting for its controllers:
	// tests build several observers' controllers in one process.
	skipNameValidation *bool
	// beforeEvaluate, when set, is called before each object is
	// evaluated. Tests only (export_test.go): set before Start.
	beforeEvaluate func(item)
}

// New returns an Observer reading through mgr's cache. Add it to mgr. The
// process must have registered the builtins (builtins.Register) before: its
// evaluations carry their own Env, with the ClaimCreationPolicies it watches.
func New(mgr manager.Manager, opts Options) (*Observer, error) {
	opts.defaults()
	if opts.Writer == nil {
		return nil, errors.New("observer: no writer")
	}
	// The QuotaClaimPolicy template's builtin renders ClaimCreationPolicies:
	// the same ones Gatekeeper holds, from this manager's cache.
	claimPolicies := opts.ClaimPolicies
	if claimPolicies == nil {
		claimPolicies = claimpolicies.NewSet()
		claimPolicies.SetSystemNamespace(opts.SystemNamespace)
		if err := claimPolicies.Watch(context.Background(), mgr.GetCache(), mgr.GetCache()); err != nil {
			return nil, fmt.Errorf("observer: %w", err)
		}
	}
	p, err := newPolicy(&builtins.Env{ClaimPolicies: claimPolicies})
	if err != nil {
		return nil, fmt.Errorf("observer: constraint client: %w", err)
	}
	o := &Observer{
		opts: opts, cache: mgr.GetCache(), client: mgr.GetClient(), live: mgr.GetAPIReader(), mapper: mgr.GetRESTMapper(), policy: p,
		log:              mgr.GetLogger().WithName("observer"),
		recorder:         mgr.GetEventRecorder("quotakeeper-observer"),
		tally:            counting.NewTally(),
		known:            map[string]item{},
		stamps:           map[string]stamp{},
		watched:          map[schema.GroupKind]*meta.RESTMapping{},
		whole:            map[schema.GroupKind]bool{},
		listing:          map[listingKey]*listingInformer{},
		informed:         map[schema.GroupVersionKind]bool{},
		lastWrite:        map[ledger.BucketKey]time.Time{},
		reservationClock: counting.NewReservationClock(opts.MinReservationAge),
		sums:             newSumState(opts.SumBarrier),
		eventAt:          map[item]time.Time{}, dirtySince: map[ledger.BucketKey]time.Time{},
		writing:  map[ledger.BucketKey]time.Time{},
		versions: map[string]string{}, recounts: map[string]*recount{}, stamped: map[string]string{},
	}
	o.skipNameValidation = mgr.GetControllerOptions().SkipNameValidation
	o.objects, err = cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultTransform: o.uncounted,
	})
	if err != nil {
		return nil, fmt.Errorf("observer: the cache of counted kinds: %w", err)
	}
	if err := mgr.Add(o.objects); err != nil {
		return nil, fmt.Errorf("observer: %w", err)
	}
	if opts.ObjectClaims {
		// A client of its own: client-go rate-limits per client, so the
		// views' writes queue behind each other, not behind anyone else's.
		cfg := rest.CopyConfig(mgr.GetConfig())
		cfg.RateLimiter = nil
		cfg.QPS, cfg.Burst = opts.ObjectClaimsQPS, int(2*opts.ObjectClaimsQPS)
		o.viewClient, err = client.New(cfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return nil, fmt.Errorf("observer: ResourceClaim view client: %w", err)
		}
		o.views = newViewSet()
		// An object a constraint can no longer count keeps counting what
		// its views claim, after a restart too (processObject).
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), &quotav1alpha1.ResourceClaim{}, viewOwnerIndex, indexViewOwner); err != nil {
			return nil, fmt.Errorf("observer: %w", err)
		}
	}
	return o, nil
}

// NeedLeaderElection: one writer of observed usage at a time.
func (o *Observer) NeedLeaderElection() bool { return true }

// Start runs the observer until ctx ends: it loads the policy, evaluates
// every object, and only then writes, so no bucket is written from a
// partial view; then it follows events, and re-evaluates everything every
// Resync. Its work runs on three controllers (controllers.go), started
// once the initial load is done; their queues exist from the start, so
// the informers' events wait there meanwhile.
func (o *Observer) Start(ctx context.Context) error {
	evaluate, evaluateQueue, err := newController(evaluateController, o.opts.Workers, o.skipNameValidation, o.log, logItem,
		countFailures(metrics.OperationEvaluate, o.process))
	if err != nil {
		return fmt.Errorf("observer: %w", err)
	}
	defer evaluateQueue.ShutDown() // in case the controller never starts
	write, writeQueue, err := newController(writeController, 2, o.skipNameValidation, o.log, logBucket,
		countFailures(metrics.OperationWrite, o.write))
	if err != nil {
		return fmt.Errorf("observer: %w", err)
	}
	defer writeQueue.ShutDown()
	o.events, o.writes = evaluateQueue, writeQueue
	controllers := []manager.Runnable{evaluate, write}
	if o.views != nil {
		views, viewQueue, err := newController(viewsController, 2, o.skipNameValidation, o.log, logView,
			reconcile.TypedFunc[types.NamespacedName](o.reconcileView))
		if err != nil {
			return fmt.Errorf("observer: %w", err)
		}
		defer viewQueue.ShutDown()
		o.viewQueue = viewQueue
		controllers = append(controllers, views)
	}
	o.rebuilt = make(chan struct{})

	// The counted kinds' cache starts beside the observer (both after
	// leader election); an informer got from it before it started would
	// be handed out unsynced.
	if !o.objects.WaitForCacheSync(ctx) {
		return nil
	}
	if err := o.watchFixed(ctx); err != nil {
		return err
	}
	loadStart := time.Now()
	if err := o.loadPublished(ctx); err != nil {
		return fmt.Errorf("observer: the counted policy versions: %w", err)
	}
	failed, err := o.initialLoad(ctx, evaluate)
	if err != nil {
		return err
	}
	loadTime := time.Since(loadStart)
	for !o.opts.WriterSynced() {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	// Every object was evaluated under every constraint loaded but those
	// that failed, which the informers' replay brings back: the versions
	// are published once those are counted and the buckets written.
	o.mu.Lock()
	for _, r := range o.recounts {
		r.items = map[item]bool{}
		for _, it := range failed {
			r.items[it] = true
		}
		if len(r.items) == 0 {
			r.tallied = o.opts.Now()
		}
	}
	o.mu.Unlock()
	o.ready.Store(true)
	close(o.rebuilt)
	o.enqueueAllBuckets(ctx)
	o.enqueueAllViews(ctx)
	o.mu.Lock()
	evaluated := len(o.known)
	o.mu.Unlock()
	o.log.Info("observing", "kinds", o.watchedKinds(), "objects", evaluated, "initialLoad", loadTime.Round(time.Millisecond).String())

	// The controllers stop, their workers done, once ctx ends; the first
	// to fail stops the others and the observer.
	g, ctx := errgroup.WithContext(ctx)
	for _, c := range controllers {
		g.Go(func() error { return c.Start(ctx) })
	}
	g.Go(func() error {
		o.tick(ctx)
		return nil
	})
	g.Go(func() error {
		o.freeSums(ctx)
		return nil
	})
	return g.Wait()
}

// tick queues a resync every Resync and publishes the counted policy
// versions, until ctx ends.
func (o *Observer) tick(ctx context.Context) {
	ticker := time.NewTicker(o.opts.Resync)
	defer ticker.Stop()
	publish := time.NewTicker(publishInterval)
	defer publish.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			o.events.Add(item{kind: itemResync})
		case <-publish.C:
			if err := o.publish(ctx); err != nil {
				metrics.ObserverError(metrics.OperationWrite)
				o.log.Error(err, "publishing the counted policy versions")
			}
		}
	}
}
