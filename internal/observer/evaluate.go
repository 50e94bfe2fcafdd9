package observer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/counted"
	"github.com/quotakeeper/quotakeeper/internal/counting"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	quotarego "github.com/quotakeeper/quotakeeper/rego"
)

// Evaluation: the evaluate controller's items (templates, constraints,
// objects and claims), and what each event changes in the tally.

// initialLoad loads every quota template and deny constraint and evaluates
// every object and claim, synchronously, before the first write, through
// evaluate's reconciler (its workers do not run yet). The
// informers' handlers queue the same items again; processObject skips
// what it has already evaluated unchanged. It returns the objects whose
// evaluation failed: the versions loaded are published only once those are
// counted too (Start).
//
// It does not return before every quota template's constraint kind is
// watched and every constraint loaded: a constraint the observer cannot
// see counts nothing, and a bucket written without it (another constraint
// counting into the same bucket) would decide against less than the live
// objects use. Gatekeeper makes a template's constraint kind moments after
// the template; until then this waits, and nothing is written.
func (o *Observer) initialLoad(ctx context.Context, evaluate controller.TypedController[item]) (failed []item, err error) {
	templates := &unstructured.UnstructuredList{}
	templates.SetGroupVersionKind(templateGVK.GroupVersion().WithKind(templateGVK.Kind + "List"))
	if err := o.cache.List(ctx, templates); err != nil {
		return nil, err
	}
	pending := make([]string, 0, len(templates.Items))
	for _, t := range templates.Items {
		pending = append(pending, t.GetName())
	}
	for {
		var unwatched []string
		for _, name := range pending {
			err := o.processTemplate(ctx, name)
			switch {
			case errors.Is(err, errKindUnwatched):
				unwatched = append(unwatched, name)
				o.log.Info("waiting for a quota template's constraint kind; the observer writes nothing until it is watched", "template", name, "error", err.Error())
			case err != nil:
				// Gatekeeper cannot compile it either: it enforces nothing.
				o.log.Error(err, "loading template", "template", name)
			}
		}
		if len(unwatched) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
		pending = unwatched
	}
	constraints := o.constraintItems(ctx)
	o.loadingConstraints.Store(true)
	for _, it := range constraints {
		if err := evaluateNow(ctx, evaluate, it); err != nil {
			// Not published, so not decided on either (package counted).
			o.log.Error(err, "loading constraint", "kind", it.gvk.Kind, "name", it.name)
		}
	}
	o.loadingConstraints.Store(false)
	// While the objects are evaluated, create reservations are folded on
	// top of the buckets' last written figures (rebuild.go), until Start
	// has made the observer ready. Folding needs the policy (every
	// template and constraint, loaded above) and reads each reserved
	// object from the API server, not the informers: so it starts before
	// the matched kinds' informers list, which at 100,000 objects takes
	// seconds (a create made at the manager's start counted sooner).
	go o.foldWhileRebuilding(ctx, o.rebuilt)
	blind, err := o.watchMatchedKinds(ctx)
	if blind {
		for _, it := range constraints {
			o.events.AddAfter(it, blindRetry)
		}
	}
	if err != nil {
		o.log.Error(err, "watching the kinds the constraints match")
	}
	// Objects on every worker at once: a restart's rebuild is this loop.
	// Each goes through the evaluate controller's reconciler, which
	// recovers a panic as that object's failure: one object that panics
	// does not keep the observer from starting.
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(o.opts.Workers)
	for _, it := range o.objectItems(ctx, "") {
		g.Go(func() error {
			if err := evaluateNow(ctx, evaluate, it); err != nil {
				o.log.Error(err, "evaluating", logItem(it)...)
				mu.Lock()
				failed = append(failed, it)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait() // nil: failures are collected
	return failed, nil
}

// errKindUnwatched: a quota template's constraint kind cannot be watched
// (yet).
var errKindUnwatched = errors.New("constraint kind not watched")

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
		for _, obj := range o.objectItems(ctx, it.name) {
			o.events.Add(obj)
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
	if apierrors.IsNotFound(err) || !quotarego.IsQuotaTemplate(u) || u.GetDeletionTimestamp() != nil {
		removed, err := o.policy.removeTemplate(ctx, name)
		if removed && err == nil {
			o.events.Add(item{kind: itemResync})
		}
		return err
	}
	kind, changed, err := o.policy.setTemplate(ctx, u)
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
			return fmt.Errorf("%w: watch %s constraints: %w", errKindUnwatched, kind, err)
		}
	}
	if changed && o.ready.Load() {
		// Constraints loaded before the template changed are reloaded,
		// and recounted before their buckets decide again.
		o.mu.Lock()
		o.recountKind(kind)
		o.mu.Unlock()
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
	version := ""
	if u != nil {
		if version, err = counted.Version(u); err != nil {
			return err
		}
		stamped, err := o.stampVersion(ctx, u, version)
		if err != nil {
			return fmt.Errorf("constraint %s %s: writing parameters.%s: %w", it.gvk.Kind, it.name, counted.Field, err)
		}
		if !stamped {
			// Gatekeeper holds it without the version (or with an old
			// one): quota.reserve denies what it charges until the
			// stamped constraint comes back as an event.
			version = ""
		}
	}
	changed, err := o.policy.setConstraint(ctx, it.gvk.GroupKind(), it.name, u)
	if err != nil {
		return fmt.Errorf("constraint %s %s: %w", it.gvk.Kind, it.name, err)
	}
	o.mu.Lock()
	recount := o.setVersion(counted.Key(it.gvk.Kind, it.name), version)
	o.mu.Unlock()
	if o.loadingConstraints.Load() {
		return nil // initialLoad watches what they all match, once
	}
	blind, err := o.watchMatchedKinds(ctx)
	if blind {
		o.events.AddAfter(it, blindRetry)
	}
	if err != nil {
		return err
	}
	if (changed || recount) && o.ready.Load() {
		// A change re-evaluates everything; a constraint's new version is
		// counted by that resync even when the loaded set did not change
		// (a warn constraint's edit).
		o.events.Add(item{kind: itemResync})
	}
	return nil
}

// processObject evaluates one object and records what it counts.
func (o *Observer) processObject(ctx context.Context, it item) error {
	if o.beforeEvaluate != nil {
		o.beforeEvaluate(it)
	}
	// The policy version before anything is read: an evaluation that
	// races a policy change is stamped with the older one, so it is done
	// again and counts for no recount of the newer one.
	version := o.policy.version.Load()
	o.mu.Lock()
	mapping, whole := o.watched[it.gvk.GroupKind()], o.whole[it.gvk.GroupKind()]
	o.mu.Unlock()
	if mapping != nil && !whole && o.policy.needsWholeObject(it.gvk.GroupKind()) {
		// A constraint now reads more than metadata and its kind's whole
		// informer is not started yet (processConstraint starts it): not
		// counted from metadata meanwhile, tried again.
		return fmt.Errorf("%s %s/%s: waiting for the whole objects of its kind", it.gvk.Kind, it.namespace, it.name)
	}
	var u *unstructured.Unstructured
	var err error
	if mapping != nil {
		u, err = o.cachedObject(ctx, it.gvk, types.NamespacedName{Namespace: it.namespace, Name: it.name}, whole)
	}
	if apierrors.IsNotFound(err) || mapping == nil {
		o.forget(it)
		o.evaluated(it, anyPolicy)
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
	at := stamp{object: u.GetResourceVersion(), policy: version, whole: whole}
	if whole && stripped(u) && o.policy.mayCount(u, ns) {
		// Cached as metadata while no constraint matched it; one does
		// now (a new constraint, a relabelled namespace): read it whole.
		u = &unstructured.Unstructured{}
		u.SetGroupVersionKind(it.gvk)
		err := o.live.Get(ctx, types.NamespacedName{Namespace: it.namespace, Name: it.name}, u)
		if apierrors.IsNotFound(err) {
			return nil // its delete event follows
		}
		if err != nil {
			return err
		}
	}
	if ns != nil {
		at.namespace, at.labels = ns.ResourceVersion, ledger.LabelsDigest(ns.Labels)
	}
	o.mu.Lock()
	unchanged := o.stamps[it.ref()] == at
	if unchanged {
		delete(o.eventAt, it) // nothing will be written for this event
	}
	o.mu.Unlock()
	if unchanged {
		o.evaluated(it, at.policy)
		return nil
	}
	claims, violations, err := o.policy.evaluate(ctx, u, mapping, ns)
	if err != nil {
		return err
	}
	amounts, err := recordedAmounts(claims)
	if err != nil {
		return fmt.Errorf("%s %s/%s: %w", it.gvk.Kind, it.namespace, it.name, err)
	}
	var keptViews []desiredView
	if len(violations) > 0 {
		o.mu.Lock()
		before := o.tally.Amounts(it.ref())
		o.mu.Unlock()
		if before == nil {
			// Not evaluated in this process yet (a restart): what the
			// object counted is what its views claim, if it has any.
			if before, keptViews, err = o.viewedAmounts(ctx, u.GetUID()); err != nil {
				return err
			}
		}
		amounts = counting.KeepCounting(before, amounts)
		o.cannotCount(it, violations, before)
	}
	o.recordAt(it, counting.Object{UID: string(u.GetUID()), Generation: u.GetGeneration(), Namespace: it.namespace, Amounts: amounts}, &at)
	switch {
	case len(violations) > 0 && keptViews != nil:
		o.setViews(it.ref(), keptViews)
	case len(violations) > 0:
		// Its views say what it counts, which has not changed.
	case o.views != nil:
		obj := ViewedObject{
			APIVersion: mapping.GroupVersionKind.GroupVersion().String(), Kind: mapping.GroupVersionKind.Kind,
			Namespace: u.GetNamespace(), Name: u.GetName(), UID: string(u.GetUID()),
			ClusterScoped: mapping.Scope.Name() == meta.RESTScopeNameRoot,
		}
		var views []desiredView
		for _, v := range Views(obj, claims, o.opts.SystemNamespace) {
			views = append(views, desiredView{claim: v, frozen: u.GetDeletionTimestamp() != nil})
		}
		o.setViews(it.ref(), views)
	}
	o.evaluated(it, at.policy)
	return nil
}

// cannotCount reports an object some constraint cannot count: on the
// ClaimCreationPolicy the constraint enforces, or on the constraint.
func (o *Observer) cannotCount(it item, violations []violation, kept map[ledger.BucketKey]int64) {
	keeps := "it counts nothing"
	if len(kept) > 0 {
		var parts []string
		for _, key := range slices.SortedFunc(maps.Keys(kept), counting.CompareKeys) {
			parts = append(parts, fmt.Sprintf("%d of %s for %s %s", kept[key], key.ResourceType, key.Consumer.Kind, key.Consumer.Name))
		}
		keeps = "it keeps counting what it counted: " + strings.Join(parts, ", ")
	}
	o.log.Info("a constraint cannot count an object", "kind", it.gvk.Kind, "namespace", it.namespace, "name", it.name,
		"violations", len(violations), "first", violations[0].msg, "kept", keeps)
	for _, v := range violations {
		o.recorder.Eventf(reportedOn(v.constraint), nil, corev1.EventTypeWarning, ReasonCannotCount, "Observe",
			"%s %s: %s; %s", it.gvk.Kind, client.ObjectKey{Namespace: it.namespace, Name: it.name}, v.msg, keeps)
	}
}

// ReasonCannotCount is the reason of the Event cannotCount writes.
const ReasonCannotCount = "CannotCount"

// reportedOn is where a constraint's failure to count is reported: the
// ClaimCreationPolicy whose constraint it is (its author reads that
// policy, not the generated constraint), else the constraint itself.
func reportedOn(c *unstructured.Unstructured) runtime.Object {
	if ref := metav1.GetControllerOf(c); ref != nil && ref.Kind == "ClaimCreationPolicy" && ref.APIVersion == quotav1alpha1.GroupVersion.String() {
		return &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, UID: ref.UID}}
	}
	return c
}

// stamp is what an object was evaluated from. Evaluating it again from the
// same stamp gives the same amounts (the Rego reads the object, its
// namespace and the loaded policy, nothing else), so the informers' replay
// of the initial load and the periodic resync skip it: a resync of 100,000
// unchanged objects costs no Rego.
type stamp struct {
	object    string // resourceVersion
	namespace string // the namespace's resourceVersion; "" for cluster-scoped objects
	// labels: the digest of the namespace's labels (ledger.LabelsDigest),
	// which a namespace move's fold reads (moveOf): a change of its
	// annotations moves the resourceVersion without an evaluation.
	labels string
	policy uint64 // policy.version
	whole  bool   // read whole, not as metadata only
}

// processClaim counts a Granted ResourceClaim's requests, natively: no
// Rego, its requests are its amounts.
func (o *Observer) processClaim(ctx context.Context, it item) error {
	c := &quotav1alpha1.ResourceClaim{}
	err := o.cache.Get(ctx, types.NamespacedName{Namespace: it.namespace, Name: it.name}, c)
	if apierrors.IsNotFound(err) || (err == nil && quotav1alpha1.IsView(c.Labels)) {
		o.forget(it) // a view counts nothing: its object is counted
		o.evaluated(it, anyPolicy)
		return nil
	}
	if err != nil {
		return err
	}
	o.record(it, counting.Object{UID: string(c.UID), Generation: c.Generation, Namespace: c.Namespace, Amounts: ClaimAmounts(c)})
	o.evaluated(it, anyPolicy) // a claim counts its requests, whatever the policy
	return nil
}

// viewedAmounts is what the views of the object uid claim, and those views
// kept as they are.
func (o *Observer) viewedAmounts(ctx context.Context, uid types.UID) (map[ledger.BucketKey]int64, []desiredView, error) {
	if o.views == nil {
		return nil, nil, nil
	}
	views := &quotav1alpha1.ResourceClaimList{}
	if err := o.cache.List(ctx, views, client.MatchingFields{viewOwnerIndex: string(uid)}); err != nil {
		return nil, nil, fmt.Errorf("the views of %s: %w", uid, err)
	}
	var amounts map[ledger.BucketKey]int64
	kept := []desiredView{}
	for i := range views.Items {
		v := &views.Items[i]
		a, err := counting.Amounts([]ledger.Claim{claimOf(v)})
		if err != nil {
			continue
		}
		if amounts == nil {
			amounts = map[ledger.BucketKey]int64{}
		}
		for key, n := range a {
			amounts[key] += n
		}
		kept = append(kept, desiredView{claim: v, frozen: true})
	}
	return amounts, kept, nil
}

// viewOwnerIndex indexes views by the uid of the object they show.
const viewOwnerIndex = "quotakeeper.view.resourceRef.uid"

func indexViewOwner(obj client.Object) []string {
	c, ok := obj.(*quotav1alpha1.ResourceClaim)
	if !ok || !quotav1alpha1.IsView(c.Labels) || c.Spec.ResourceRef == nil {
		return nil
	}
	return []string{c.Spec.ResourceRef.UID}
}

// ClaimAmounts is what a ResourceClaim counts: its requests when it is
// Granted (for its current generation) and not a view, else nothing.
func ClaimAmounts(c *quotav1alpha1.ResourceClaim) map[ledger.BucketKey]int64 {
	if quotav1alpha1.IsView(c.Labels) || !quotav1alpha1.IsTrue(c.Status.Conditions, quotav1alpha1.ConditionGranted, c.Generation) {
		return nil
	}
	amounts, err := counting.Amounts([]ledger.Claim{claimOf(c)})
	if err != nil {
		return nil // the ledger refused such a claim: it holds nothing
	}
	return amounts
}

// claimOf is a ResourceClaim's requests as a ledger claim.
func claimOf(c *quotav1alpha1.ResourceClaim) ledger.Claim {
	consumer := ledgerconv.Consumer(c.Spec.ConsumerRef)
	claim := ledger.Claim{ID: string(c.UID)}
	for _, r := range c.Spec.Requests {
		claim.Requests = append(claim.Requests, ledger.Request{Consumer: consumer, ResourceType: r.ResourceType, Amount: r.Amount, Dimensions: r.Dimensions})
	}
	return claim
}

func (o *Observer) record(it item, obj counting.Object) { o.recordAt(it, obj, nil) }

// recordAt records obj and, when at is not nil, what it was evaluated from,
// at one moment: a write that finds the stamp (a namespace move's fold,
// moveOf) finds what it counts in the tally.
func (o *Observer) recordAt(it item, obj counting.Object, at *stamp) {
	o.mu.Lock()
	changed := o.tally.Set(it.ref(), obj)
	o.known[it.ref()] = it
	if at != nil {
		o.stamps[it.ref()] = *at
	}
	o.markDirty(it, changed)
	o.mu.Unlock()
	o.dirty(changed)
}

func (o *Observer) forget(it item) {
	o.mu.Lock()
	changed := o.tally.Remove(it.ref())
	delete(o.known, it.ref())
	delete(o.stamps, it.ref())
	o.markDirty(it, changed)
	o.mu.Unlock()
	o.dirty(changed)
	o.setViews(it.ref(), nil)
}

func (o *Observer) dirty(keys []ledger.BucketKey) {
	if !o.ready.Load() {
		return // the first writes wait for the initial load
	}
	for _, k := range keys {
		o.writes.Add(k)
	}
}

// event queues an object or claim event, remembering when the first event
// not yet evaluated arrived: the start of the observer lag metric.
func (o *Observer) event(it item) {
	o.mu.Lock()
	if _, ok := o.eventAt[it]; !ok {
		o.eventAt[it] = time.Now()
	}
	o.mu.Unlock()
	o.events.Add(it)
}

// markDirty takes its event time (now, for an evaluation no event asked
// for: a resync, a relabelled namespace) and makes it the time the changed
// buckets have been waiting since, unless they waited longer already. The
// caller holds o.mu.
func (o *Observer) markDirty(it item, changed []ledger.BucketKey) {
	since, ok := o.eventAt[it]
	delete(o.eventAt, it)
	if len(changed) == 0 || !o.ready.Load() {
		return
	}
	if !ok {
		since = time.Now()
	}
	for _, k := range changed {
		if t, ok := o.dirtySince[k]; !ok || since.Before(t) {
			o.dirtySince[k] = since
		}
	}
}
