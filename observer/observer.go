package observer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/quotakeeper/quotakeeper/api/ledgerconv"
	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/ledger"
)

// Writer writes a bucket's observation; *ledger.Ledger is one.
type Writer interface {
	Observe(ctx context.Context, key ledger.BucketKey, obs ledger.Observation) (ledger.Bucket, error)
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
	if o.WriterSynced == nil {
		o.WriterSynced = func() bool { return true }
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
	opts   Options
	cache  cache.Cache
	live   client.Reader // expiry look-ups must not trust a lagging cache
	mapper meta.RESTMapper
	policy *policy
	log    logr.Logger

	events workqueue.TypedRateLimitingInterface[item]
	writes workqueue.TypedRateLimitingInterface[ledger.BucketKey]
	ready  atomic.Bool

	mu        sync.Mutex
	tally     *Tally
	known     map[string]item                        // tally refs
	watched   map[schema.GroupKind]*meta.RESTMapping // kinds with an informer
	informed  map[schema.GroupVersionKind]bool       // informers with our handler
	lastWrite map[ledger.BucketKey]time.Time
}

// New returns an Observer reading through mgr's cache. Add it to mgr.
func New(mgr manager.Manager, opts Options) (*Observer, error) {
	opts.defaults()
	if opts.Writer == nil {
		return nil, errors.New("observer: no writer")
	}
	p, err := newPolicy()
	if err != nil {
		return nil, fmt.Errorf("observer: constraint client: %w", err)
	}
	return &Observer{
		opts: opts, cache: mgr.GetCache(), live: mgr.GetAPIReader(), mapper: mgr.GetRESTMapper(), policy: p,
		log:       mgr.GetLogger().WithName("observer"),
		tally:     NewTally(),
		known:     map[string]item{},
		watched:   map[schema.GroupKind]*meta.RESTMapping{},
		informed:  map[schema.GroupVersionKind]bool{},
		lastWrite: map[ledger.BucketKey]time.Time{},
	}, nil
}

// NeedLeaderElection: one writer of observed usage at a time.
func (o *Observer) NeedLeaderElection() bool { return true }

// Start runs the observer until ctx ends: it loads the policy, evaluates
// every object, and only then writes, so no bucket is written from a
// partial view; then it follows events, and re-evaluates everything every
// Resync.
func (o *Observer) Start(ctx context.Context) error {
	o.events = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[item](),
		workqueue.TypedRateLimitingQueueConfig[item]{Name: "observer-events"})
	o.writes = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[ledger.BucketKey](),
		workqueue.TypedRateLimitingQueueConfig[ledger.BucketKey]{Name: "observer-writes"})
	defer o.events.ShutDown()
	defer o.writes.ShutDown()

	if err := o.watchFixed(ctx); err != nil {
		return err
	}
	if err := o.initialLoad(ctx); err != nil {
		return err
	}
	for !o.opts.WriterSynced() {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	o.ready.Store(true)
	o.enqueueAllBuckets(ctx)
	o.log.Info("observing", "kinds", o.watchedKinds())

	var wg sync.WaitGroup
	for range o.opts.Workers {
		wg.Go(func() {
			for o.nextEvent(ctx) {
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for o.nextWrite(ctx) {
			}
		})
	}
	ticker := time.NewTicker(o.opts.Resync)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			o.events.ShutDown()
			o.writes.ShutDown()
			wg.Wait()
			return nil
		case <-ticker.C:
			o.events.Add(item{kind: itemResync})
		}
	}
}

// watchFixed adds the handlers on the informers every observer needs. Each
// GetInformer waits for its informer to sync.
func (o *Observer) watchFixed(ctx context.Context) error {
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(templateGVK)
	// Gatekeeper may be installed after the manager: wait for its CRD.
	for {
		err := o.inform(ctx, tmpl, func(obj client.Object) {
			o.events.Add(item{kind: itemTemplate, name: obj.GetName()})
		}, nil)
		if err == nil {
			break
		}
		o.log.Info("cannot watch ConstraintTemplates yet (is Gatekeeper installed?)", "error", err.Error())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(10 * time.Second):
		}
	}
	if err := o.inform(ctx, &corev1.Namespace{}, func(obj client.Object) {
		o.events.Add(item{kind: itemNamespace, name: obj.GetName()})
	}, labelsChanged); err != nil {
		return err
	}
	if err := o.inform(ctx, &quotav1alpha1.ResourceClaim{}, func(obj client.Object) {
		o.events.Add(item{kind: itemClaim, gvk: claimGVK, namespace: obj.GetNamespace(), name: obj.GetName()})
	}, nil); err != nil {
		return err
	}
	// A new reservation is something to fold or, later, expire.
	return o.inform(ctx, &quotav1alpha1.AllowanceBucket{}, func(obj client.Object) {
		if b, ok := obj.(*quotav1alpha1.AllowanceBucket); ok && len(b.Status.Reservations) > 0 && o.ready.Load() {
			o.writes.Add(ledgerconv.KeyOf(b))
		}
	}, nil)
}

// labelsChanged: a namespace's labels name its consumers.
func labelsChanged(oldObj, newObj client.Object) bool {
	return !equalLabels(oldObj.GetLabels(), newObj.GetLabels())
}

func equalLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// inform adds a handler calling fn on every add, delete and update (those
// that pass changed, when given) of obj's kind.
func (o *Observer) inform(ctx context.Context, obj client.Object, fn func(client.Object), changed func(oldObj, newObj client.Object) bool) error {
	inf, err := o.cache.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	unwrap := func(x any) client.Object {
		if d, ok := x.(toolscache.DeletedFinalStateUnknown); ok {
			x = d.Obj
		}
		c, _ := x.(client.Object)
		return c
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(x any) {
			if c := unwrap(x); c != nil {
				fn(c)
			}
		},
		UpdateFunc: func(oldX, newX any) {
			oldObj, newObj := unwrap(oldX), unwrap(newX)
			if newObj == nil || oldObj == nil || oldObj.GetResourceVersion() == newObj.GetResourceVersion() {
				return
			}
			if changed == nil || changed(oldObj, newObj) {
				fn(newObj)
			}
		},
		DeleteFunc: func(x any) {
			if c := unwrap(x); c != nil {
				fn(c)
			}
		},
	})
	return err
}

// initialLoad loads every quota template and deny constraint and evaluates
// every object and claim, synchronously, before the first write. The
// informers' handlers queue the same items again; evaluating twice is
// harmless.
func (o *Observer) initialLoad(ctx context.Context) error {
	templates := &unstructured.UnstructuredList{}
	templates.SetGroupVersionKind(templateGVK.GroupVersion().WithKind(templateGVK.Kind + "List"))
	if err := o.cache.List(ctx, templates); err != nil {
		return err
	}
	for _, t := range templates.Items {
		if err := o.process(ctx, item{kind: itemTemplate, name: t.GetName()}); err != nil {
			o.log.Error(err, "loading template", "template", t.GetName())
		}
	}
	for _, it := range o.constraintItems(ctx) {
		if err := o.process(ctx, it); err != nil {
			o.log.Error(err, "loading constraint", "kind", it.gvk.Kind, "name", it.name)
		}
	}
	for _, it := range o.objectItems(ctx) {
		if err := o.process(ctx, it); err != nil {
			o.log.Error(err, "evaluating", "kind", it.gvk.Kind, "namespace", it.namespace, "name", it.name)
		}
	}
	return nil
}

// nextEvent processes one evaluation item; false once the queue is shut down.
func (o *Observer) nextEvent(ctx context.Context) bool {
	it, shutdown := o.events.Get()
	if shutdown {
		return false
	}
	defer o.events.Done(it)
	if err := o.process(ctx, it); err != nil {
		o.log.Error(err, "observing", "kind", it.gvk.Kind, "namespace", it.namespace, "name", it.name)
		o.events.AddRateLimited(it)
		return true
	}
	o.events.Forget(it)
	return true
}

func (o *Observer) process(ctx context.Context, it item) error {
	switch it.kind {
	case itemTemplate:
		return o.processTemplate(ctx, it.name)
	case itemConstraint:
		return o.processConstraint(ctx, it)
	case itemObject:
		return o.processObject(ctx, it)
	case itemClaim:
		return o.processClaim(ctx, it)
	case itemNamespace:
		for _, obj := range o.objectItems(ctx) {
			if obj.namespace == it.name {
				o.events.Add(obj)
			}
		}
	case itemResync:
		o.resync(ctx)
	}
	return nil
}

// processTemplate loads a quota template (or unloads a removed one) and
// watches its constraint kind.
func (o *Observer) processTemplate(ctx context.Context, name string) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(templateGVK)
	err := o.cache.Get(ctx, types.NamespacedName{Name: name}, u)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if apierrors.IsNotFound(err) || !isQuotaTemplate(u) || u.GetDeletionTimestamp() != nil {
		removed, err := o.policy.removeTemplate(ctx, name)
		if removed && err == nil {
			o.events.Add(item{kind: itemResync})
		}
		return err
	}
	kind, err := o.policy.setTemplate(ctx, u)
	if err != nil {
		return fmt.Errorf("template %s: %w", name, err)
	}
	gvk := constraintGroupVersion.WithKind(kind)
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if o.markInformed(gvk) {
		// Gatekeeper creates the constraint CRD after compiling the
		// template: until then the kind is unknown, and we try again.
		if err := o.inform(ctx, obj, func(c client.Object) {
			o.events.Add(item{kind: itemConstraint, gvk: gvk, name: c.GetName()})
		}, nil); err != nil {
			o.unmarkInformed(gvk)
			return fmt.Errorf("watch %s constraints: %w", kind, err)
		}
	}
	if o.ready.Load() {
		// Constraints loaded before the template changed are reloaded.
		o.events.Add(item{kind: itemResync})
	}
	return nil
}

// processConstraint loads a deny constraint (or unloads it) and watches
// the kinds the loaded constraints match; a change re-evaluates everything.
func (o *Observer) processConstraint(ctx context.Context, it item) error {
	if o.policy.templateOf(it.gvk.Kind) == "" {
		return nil // its template is not (yet) a loaded quota template
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(it.gvk)
	err := o.cache.Get(ctx, types.NamespacedName{Name: it.name}, u)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if apierrors.IsNotFound(err) {
		u = nil
	}
	changed, err := o.policy.setConstraint(ctx, it.gvk.GroupKind(), it.name, u)
	if err != nil {
		return fmt.Errorf("constraint %s %s: %w", it.gvk.Kind, it.name, err)
	}
	if err := o.watchMatchedKinds(ctx); err != nil {
		return err
	}
	if changed && o.ready.Load() {
		o.events.Add(item{kind: itemResync})
	}
	return nil
}

// watchMatchedKinds starts an informer for every kind a loaded constraint
// matches. Informers are never stopped: a kind no longer matched costs an
// informer until the manager restarts.
func (o *Observer) watchMatchedKinds(ctx context.Context) error {
	kinds, unwatchable := o.policy.matchKinds()
	if len(unwatchable) > 0 {
		o.log.Info("constraints that match every kind count nothing here: name their kinds in spec.match.kinds", "constraints", unwatchable)
	}
	var errs []error
	for _, gk := range kinds {
		o.mu.Lock()
		_, ok := o.watched[gk]
		o.mu.Unlock()
		if ok {
			continue
		}
		mapping, err := o.mapper.RESTMapping(gk)
		if err != nil {
			errs = append(errs, fmt.Errorf("kind %s: %w", gk, err))
			continue
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(mapping.GroupVersionKind)
		gvk := mapping.GroupVersionKind
		if err := o.inform(ctx, obj, func(c client.Object) {
			o.events.Add(item{kind: itemObject, gvk: gvk, namespace: c.GetNamespace(), name: c.GetName()})
		}, nil); err != nil {
			errs = append(errs, fmt.Errorf("watch %s: %w", gk, err))
			continue
		}
		o.mu.Lock()
		o.watched[gk] = mapping
		o.mu.Unlock()
	}
	return errors.Join(errs...)
}

func (o *Observer) markInformed(gvk schema.GroupVersionKind) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.informed[gvk] {
		return false
	}
	o.informed[gvk] = true
	return true
}

func (o *Observer) unmarkInformed(gvk schema.GroupVersionKind) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.informed, gvk)
}

func (o *Observer) watchedKinds() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for gk := range o.watched {
		out = append(out, gk.String())
	}
	return out
}

// processObject evaluates one object and records what it counts.
func (o *Observer) processObject(ctx context.Context, it item) error {
	o.mu.Lock()
	mapping := o.watched[it.gvk.GroupKind()]
	o.mu.Unlock()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(it.gvk)
	err := o.cache.Get(ctx, types.NamespacedName{Namespace: it.namespace, Name: it.name}, u)
	if apierrors.IsNotFound(err) || mapping == nil {
		o.forget(it)
		return nil
	}
	if err != nil {
		return err
	}
	var ns *corev1.Namespace
	if it.namespace != "" {
		ns = &corev1.Namespace{}
		if err := o.cache.Get(ctx, types.NamespacedName{Name: it.namespace}, ns); err != nil {
			if !apierrors.IsNotFound(err) {
				return err
			}
			ns = nil
		}
	}
	claims, violations, err := o.policy.evaluate(ctx, u, mapping, ns)
	if err != nil {
		return err
	}
	if len(violations) > 0 {
		o.log.V(1).Info("constraints cannot count an object", "kind", it.gvk.Kind, "namespace", it.namespace, "name", it.name, "violations", violations)
	}
	amounts, err := Amounts(claims)
	if err != nil {
		return fmt.Errorf("%s %s/%s: %w", it.gvk.Kind, it.namespace, it.name, err)
	}
	o.record(it, Object{UID: string(u.GetUID()), Generation: u.GetGeneration(), Namespace: it.namespace, Amounts: amounts})
	return nil
}

// processClaim counts a Granted ResourceClaim's requests, natively: no
// Rego, its requests are its amounts.
func (o *Observer) processClaim(ctx context.Context, it item) error {
	c := &quotav1alpha1.ResourceClaim{}
	err := o.cache.Get(ctx, types.NamespacedName{Namespace: it.namespace, Name: it.name}, c)
	if apierrors.IsNotFound(err) {
		o.forget(it)
		return nil
	}
	if err != nil {
		return err
	}
	o.record(it, Object{UID: string(c.UID), Generation: c.Generation, Namespace: c.Namespace, Amounts: ClaimAmounts(c)})
	return nil
}

// ClaimAmounts is what a ResourceClaim counts: its requests when it is
// Granted (for its current generation), else nothing.
func ClaimAmounts(c *quotav1alpha1.ResourceClaim) map[ledger.BucketKey]int64 {
	if !quotav1alpha1.IsTrue(c.Status.Conditions, quotav1alpha1.ConditionGranted, c.Generation) {
		return nil
	}
	consumer := ledgerconv.Consumer(c.Spec.ConsumerRef)
	claim := ledger.Claim{ID: string(c.UID)}
	for _, r := range c.Spec.Requests {
		claim.Requests = append(claim.Requests, ledger.Request{Consumer: consumer, ResourceType: r.ResourceType, Amount: r.Amount, Dimensions: r.Dimensions})
	}
	amounts, err := Amounts([]ledger.Claim{claim})
	if err != nil {
		return nil // the ledger refused such a claim: it holds nothing
	}
	return amounts
}

func (o *Observer) record(it item, obj Object) {
	o.mu.Lock()
	changed := o.tally.Set(it.ref(), obj)
	o.known[it.ref()] = it
	o.mu.Unlock()
	o.dirty(changed)
}

func (o *Observer) forget(it item) {
	o.mu.Lock()
	changed := o.tally.Remove(it.ref())
	delete(o.known, it.ref())
	o.mu.Unlock()
	o.dirty(changed)
}

func (o *Observer) dirty(keys []ledger.BucketKey) {
	if !o.ready.Load() {
		return // the first writes wait for the initial load
	}
	for _, k := range keys {
		o.writes.Add(k)
	}
}

// constraintItems lists every constraint of every loaded template's kind.
func (o *Observer) constraintItems(ctx context.Context) []item {
	o.mu.Lock()
	var gvks []schema.GroupVersionKind
	for gvk := range o.informed {
		gvks = append(gvks, gvk)
	}
	o.mu.Unlock()
	var out []item
	for _, gvk := range gvks {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := o.cache.List(ctx, list); err != nil {
			o.log.Error(err, "listing constraints", "kind", gvk.Kind)
			continue
		}
		for _, c := range list.Items {
			out = append(out, item{kind: itemConstraint, gvk: gvk, name: c.GetName()})
		}
	}
	return out
}

// objectItems lists every object of every watched kind, every claim, and
// every object the tally holds (those gone are then forgotten).
func (o *Observer) objectItems(ctx context.Context) []item {
	o.mu.Lock()
	var gvks []schema.GroupVersionKind
	for _, m := range o.watched {
		gvks = append(gvks, m.GroupVersionKind)
	}
	seen := map[item]bool{}
	var out []item
	for _, it := range o.known {
		seen[it] = true
		out = append(out, it)
	}
	o.mu.Unlock()
	add := func(it item) {
		if !seen[it] {
			seen[it] = true
			out = append(out, it)
		}
	}
	for _, gvk := range gvks {
		ulist := &unstructured.UnstructuredList{}
		ulist.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := o.cache.List(ctx, ulist); err != nil {
			o.log.Error(err, "listing", "kind", gvk.Kind)
			continue
		}
		for _, u := range ulist.Items {
			add(item{kind: itemObject, gvk: gvk, namespace: u.GetNamespace(), name: u.GetName()})
		}
	}
	var claims quotav1alpha1.ResourceClaimList
	if err := o.cache.List(ctx, &claims); err != nil {
		o.log.Error(err, "listing ResourceClaims")
	}
	for _, c := range claims.Items {
		add(item{kind: itemClaim, gvk: claimGVK, namespace: c.Namespace, name: c.Name})
	}
	return out
}

// resync reloads every constraint, re-evaluates every object and writes
// every bucket: whatever an event missed is corrected here.
func (o *Observer) resync(ctx context.Context) {
	for _, it := range o.constraintItems(ctx) {
		o.events.Add(it)
	}
	for _, it := range o.objectItems(ctx) {
		o.events.Add(it)
	}
	o.enqueueAllBuckets(ctx)
}

// enqueueAllBuckets queues a write of every bucket that exists or that an
// object counts in: a bucket whose objects are all gone goes to zero.
func (o *Observer) enqueueAllBuckets(ctx context.Context) {
	var buckets quotav1alpha1.AllowanceBucketList
	if err := o.cache.List(ctx, &buckets); err != nil {
		o.log.Error(err, "listing buckets")
	}
	for i := range buckets.Items {
		o.writes.Add(ledgerconv.KeyOf(&buckets.Items[i]))
	}
	o.mu.Lock()
	keys := o.tally.Buckets()
	o.mu.Unlock()
	for _, k := range keys {
		o.writes.Add(k)
	}
}
