package controllers

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// +kubebuilder:rbac:groups=quota.miloapis.com,resources=effectiveresourcegrants,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=quota.miloapis.com,resources=effectiveresourcegrants/status,verbs=get;update;patch

// pair is one consumer and resource type: what an EffectiveResourceGrant
// summarizes.
type pair struct {
	Consumer     ledger.Consumer
	ResourceType string
}

// effectiveReconciler keeps, in every namespace that belongs to a consumer,
// an EffectiveResourceGrant per resource type the consumer has buckets of:
// the totals of those buckets and the buckets behind them. It is what a
// tenant reads with kubectl; a consumer's buckets may live in a namespace
// the tenant cannot read (the system namespace, for an Organization).
type effectiveReconciler struct {
	client client.Client
	// refresh spaces the refreshes that usage alone causes (bucketChanges).
	refresh time.Duration
	// fanout holds, per pair, how many effective grants its last refresh
	// kept (one per namespace of the consumer): bucketChanges spaces a
	// wide pair's usage refreshes further.
	fanout sync.Map // pair → int
}

func (r *effectiveReconciler) setup(mgr ctrl.Manager) error {
	return builder.TypedControllerManagedBy[pair](mgr).
		Named("effective").
		Watches(&quotav1alpha1.AllowanceBucket{}, bucketChanges{refresh: r.refresh, fanout: r.fanoutOf}).
		// An effective grant deleted or its spec edited is put back at once.
		// Its status writes are this controller's own: were they watched,
		// each refresh's writes would queue the next refresh at once and
		// defeat bucketChanges' spacing (they did: 490 effective grant
		// writes during 4,000 creates in one Organization of 100 namespaces).
		Watches(&quotav1alpha1.EffectiveResourceGrant{}, handler.TypedEnqueueRequestsFromMapFunc(
			func(_ context.Context, o client.Object) []pair {
				e := o.(*quotav1alpha1.EffectiveResourceGrant)
				return []pair{{ledgerconv.Consumer(e.Spec.ConsumerRef), e.Spec.ResourceType}}
			}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{}, handler.TypedEnqueueRequestsFromMapFunc(r.pairsOfNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		// The units shown come from the resource type's registration.
		Watches(&quotav1alpha1.ResourceRegistration{}, handler.TypedEnqueueRequestsFromMapFunc(r.pairsOfRegistration)).
		Complete(r)
}

// bucketChanges enqueues the pair of a bucket that changed. A change of
// usage alone (allocated, reserved, the per-namespace split) waits up to
// refresh, and every change within that wait joins the same refresh (the
// delaying queue keeps an item's earliest time): a shared bucket under load
// is written many times a second, and each refresh rewrites the effective
// grant in every namespace of its consumer, which for an Organization of
// 100 namespaces made effective grants three times as many API writes as
// the buckets themselves. For the same reason a pair with more than
// grantsPerRefresh effective grants waits refresh once per grantsPerRefresh
// of them (100 namespaces: 5 × refresh), so usage alone never rewrites more
// than grantsPerRefresh effective grants of a pair per refresh. A tenant
// reads usage that late at most (the bucket and kubectl quota show it
// exact); a new bucket, a deleted one and a change of limit or grants show
// at once.
type bucketChanges struct {
	refresh time.Duration
	// fanout returns how many effective grants the pair's last refresh
	// kept (0: not yet refreshed).
	fanout func(pair) int
}

// grantsPerRefresh is how many effective grants of one pair usage alone
// may rewrite per refresh.
const grantsPerRefresh = 20

// usageDelay is how long a change of usage alone waits.
func (h bucketChanges) usageDelay(p pair) time.Duration {
	n := 0
	if h.fanout != nil {
		n = h.fanout(p)
	}
	return h.refresh * time.Duration(max(1, (n+grantsPerRefresh-1)/grantsPerRefresh))
}

func (r *effectiveReconciler) fanoutOf(p pair) int {
	n, _ := r.fanout.Load(p)
	count, _ := n.(int)
	return count
}

func bucketPair(o client.Object) pair {
	b := o.(*quotav1alpha1.AllowanceBucket)
	return pair{ledgerconv.Consumer(b.Spec.ConsumerRef), b.Spec.ResourceType}
}

func (bucketChanges) Create(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[pair]) {
	q.Add(bucketPair(e.Object))
}

func (h bucketChanges) Update(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[pair]) {
	old, cur := e.ObjectOld.(*quotav1alpha1.AllowanceBucket), e.ObjectNew.(*quotav1alpha1.AllowanceBucket)
	if old.Status.Limit != cur.Status.Limit || !apiequality.Semantic.DeepEqual(old.Status.ContributingGrantRefs, cur.Status.ContributingGrantRefs) {
		q.Add(bucketPair(cur))
		return
	}
	q.AddAfter(bucketPair(cur), h.usageDelay(bucketPair(cur)))
}

func (bucketChanges) Delete(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[pair]) {
	q.Add(bucketPair(e.Object))
}

func (bucketChanges) Generic(_ context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[pair]) {
	q.Add(bucketPair(e.Object))
}

// pairsOfRegistration: a registration that changes its units, or becomes
// active or not, changes the units every pair of its resource type shows.
// Registrations change rarely; listing the buckets then is cheap enough.
func (r *effectiveReconciler) pairsOfRegistration(ctx context.Context, o client.Object) []pair {
	reg := o.(*quotav1alpha1.ResourceRegistration)
	var buckets quotav1alpha1.AllowanceBucketList
	if err := r.client.List(ctx, &buckets); err != nil {
		log.FromContext(ctx).Error(err, "list buckets for registration", "registration", reg.Name)
	}
	seen := map[pair]bool{}
	for _, b := range buckets.Items {
		if b.Spec.ResourceType == reg.Spec.ResourceType {
			seen[pair{ledgerconv.Consumer(b.Spec.ConsumerRef), b.Spec.ResourceType}] = true
		}
	}
	return slices.Collect(maps.Keys(seen))
}

// unitsOf returns the units of resourceType's active registration, nil when
// none is active (the registration controller makes at most one active).
func (r *effectiveReconciler) unitsOf(ctx context.Context, resourceType string) (*quotav1alpha1.Units, error) {
	var regs quotav1alpha1.ResourceRegistrationList
	if err := r.client.List(ctx, &regs); err != nil {
		return nil, err
	}
	for i := range regs.Items {
		reg := &regs.Items[i]
		if reg.Spec.ResourceType == resourceType && reg.DeletionTimestamp == nil &&
			meta.IsStatusConditionTrue(reg.Status.Conditions, quotav1alpha1.ConditionActive) {
			u := quotav1alpha1.UnitsOf(reg)
			return &u, nil
		}
	}
	return nil, nil
}

// pairsOfNamespace: a namespace that gains or loses a consumer's label
// gains or loses that consumer's effective grants.
func (r *effectiveReconciler) pairsOfNamespace(ctx context.Context, o client.Object) []pair {
	ns := o.(*corev1.Namespace)
	seen := map[pair]bool{}
	var buckets quotav1alpha1.AllowanceBucketList
	if err := r.client.List(ctx, &buckets); err != nil {
		log.FromContext(ctx).Error(err, "list buckets for namespace", "namespace", ns.Name)
	}
	for _, b := range buckets.Items {
		if belongs(ns, b.Spec.ConsumerRef) {
			seen[pair{ledgerconv.Consumer(b.Spec.ConsumerRef), b.Spec.ResourceType}] = true
		}
	}
	var ergs quotav1alpha1.EffectiveResourceGrantList
	if err := r.client.List(ctx, &ergs, client.InNamespace(ns.Name)); err != nil {
		log.FromContext(ctx).Error(err, "list effective grants of namespace", "namespace", ns.Name)
	}
	for _, e := range ergs.Items {
		seen[pair{ledgerconv.Consumer(e.Spec.ConsumerRef), e.Spec.ResourceType}] = true
	}
	out := make([]pair, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	return out
}

// belongs: the namespace belongs to the consumer (its label, or it is the
// consumer), or is the namespace a namespaced consumer lives in.
func belongs(ns *corev1.Namespace, c quotav1alpha1.ConsumerRef) bool {
	return quotav1alpha1.NamespaceBelongsTo(ns.Name, ns.Labels, c) || (c.Namespace != "" && c.Namespace == ns.Name)
}

func (r *effectiveReconciler) Reconcile(ctx context.Context, p pair) (reconcile.Result, error) {
	key := pairKey(p.Consumer, p.ResourceType)
	var buckets quotav1alpha1.AllowanceBucketList
	if err := r.client.List(ctx, &buckets, client.MatchingFields{indexBucketPair: key}); err != nil {
		return reconcile.Result{}, err
	}
	var existing quotav1alpha1.EffectiveResourceGrantList
	if err := r.client.List(ctx, &existing, client.MatchingFields{indexEffectivePair: key}); err != nil {
		return reconcile.Result{}, err
	}
	targets := map[string]bool{}
	if len(buckets.Items) > 0 {
		var err error
		if targets, err = r.namespacesOf(ctx, ledgerconv.ConsumerRef(p.Consumer)); err != nil {
			return reconcile.Result{}, err
		}
	}
	// A cap to hand out (delegated/<type>) is shown in its type's units:
	// its organization's admins read what is handed out here.
	rt := p.ResourceType
	if base, ok := quotav1alpha1.DelegatedBase(rt); ok {
		rt = base
	}
	units, err := r.unitsOf(ctx, rt)
	if err != nil {
		return reconcile.Result{}, err
	}
	status := summarize(buckets.Items, units)
	if status.Delegated, err = r.delegatedParts(ctx, buckets.Items); err != nil {
		return reconcile.Result{}, err
	}
	if len(targets) == 0 {
		r.fanout.Delete(p)
	} else {
		r.fanout.Store(p, len(targets))
	}
	var errs []error
	stale := false
	write := func(e *quotav1alpha1.EffectiveResourceGrant) {
		conflict, err := r.writeStatus(ctx, e, status)
		stale = stale || conflict
		errs = append(errs, err)
	}
	for i := range existing.Items {
		e := &existing.Items[i]
		if !targets[e.Namespace] {
			errs = append(errs, client.IgnoreNotFound(r.client.Delete(ctx, e)))
			continue
		}
		delete(targets, e.Namespace)
		write(e)
	}
	for _, ns := range slices.Sorted(maps.Keys(targets)) {
		e := &quotav1alpha1.EffectiveResourceGrant{}
		e.Namespace, e.Name = ns, quotav1alpha1.EffectiveResourceGrantName(ledgerconv.ConsumerRef(p.Consumer), p.ResourceType)
		e.Spec = quotav1alpha1.EffectiveResourceGrantSpec{ConsumerRef: ledgerconv.ConsumerRef(p.Consumer), ResourceType: p.ResourceType}
		if err := r.client.Create(ctx, e); err != nil {
			if !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) { // forbidden: namespace terminating
				errs = append(errs, err)
			}
			continue
		}
		write(e)
	}
	// A conflict says the cache held an older effective grant (this
	// controller's own last write, not yet seen). The event that brings the
	// cache up to date is a status change, which this controller does not
	// watch, so unlike ignoreConflict's other callers it asks again itself,
	// or the grant keeps the older numbers until the buckets next change (a
	// load run once waited minutes on a limit of 0). It asks after the
	// refresh interval, not at once: under load the cache lags, and a quick
	// retry would write the stale grants again and conflict again, the very
	// loop the spacing exists to prevent.
	var result reconcile.Result
	if stale {
		result.RequeueAfter = r.refresh
	}
	return result, errors.Join(errs...)
}

// namespacesOf lists the live namespaces that belong to consumer c.
func (r *effectiveReconciler) namespacesOf(ctx context.Context, c quotav1alpha1.ConsumerRef) (map[string]bool, error) {
	out := map[string]bool{}
	add := func(ns *corev1.Namespace) {
		if ns.DeletionTimestamp == nil && belongs(ns, c) {
			out[ns.Name] = true
		}
	}
	for _, name := range []string{c.Namespace, namespaceConsumerName(c)} {
		if name == "" {
			continue
		}
		ns := &corev1.Namespace{}
		if err := r.client.Get(ctx, client.ObjectKey{Name: name}, ns); err == nil {
			add(ns)
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	if namespaceConsumerName(c) == "" {
		var list corev1.NamespaceList
		if err := r.client.List(ctx, &list, client.MatchingLabels{quotav1alpha1.ConsumerLabelKey(c.APIGroup, c.Kind): c.Name}); err != nil {
			return nil, err
		}
		for i := range list.Items {
			add(&list.Items[i])
		}
	}
	return out, nil
}

func namespaceConsumerName(c quotav1alpha1.ConsumerRef) string {
	if c.IsNamespace() {
		return c.Name
	}
	return ""
}

// writeStatus writes st unless e already shows it; conflict reports a
// write that lost to a newer version of e (Reconcile asks again).
func (r *effectiveReconciler) writeStatus(ctx context.Context, e *quotav1alpha1.EffectiveResourceGrant, st quotav1alpha1.EffectiveResourceGrantStatus) (conflict bool, err error) {
	if apiequality.Semantic.DeepEqual(e.Status, st) {
		return false, nil
	}
	e.Status = st
	err = r.client.Status().Update(ctx, e)
	if apierrors.IsConflict(err) {
		return true, nil
	}
	return false, client.IgnoreNotFound(err)
}

// summarize totals buckets, and writes the totals in units (nil: unknown,
// bare numbers). Sums saturate at the int64 maximum rather than fail: this
// is a read-only view, and each bucket's own figures are exact.
func summarize(buckets []quotav1alpha1.AllowanceBucket, units *quotav1alpha1.Units) quotav1alpha1.EffectiveResourceGrantStatus {
	st := quotav1alpha1.EffectiveResourceGrantStatus{Units: units}
	slices.SortFunc(buckets, func(a, b quotav1alpha1.AllowanceBucket) int { return strings.Compare(a.Name, b.Name) })
	for _, b := range buckets {
		s := b.Status
		st.TotalLimit = saturatingAdd(st.TotalLimit, s.Limit)
		st.TotalAllocated = saturatingAdd(st.TotalAllocated, s.Allocated)
		st.TotalReserved = saturatingAdd(st.TotalReserved, s.Reserved)
		st.Available = saturatingAdd(st.Available, s.Available)
		st.AllowanceBucketRefs = append(st.AllowanceBucketRefs, quotav1alpha1.BucketRef{
			Name: b.Name, Namespace: b.Namespace, Dimensions: b.Spec.Dimensions,
			Limit: s.Limit, Allocated: s.Allocated, Reserved: s.Reserved, Available: s.Available,
		})
	}
	var u quotav1alpha1.Units
	if units != nil {
		u = *units
	}
	st.Display = &quotav1alpha1.DisplayTotals{
		Limit: u.Format(st.TotalLimit), Allocated: u.Format(st.TotalAllocated),
		Reserved: u.Format(st.TotalReserved), Available: u.Format(st.Available),
	}
	return st
}

func saturatingAdd(a, b int64) int64 {
	sum, err := ledger.Add(a, b)
	switch {
	case err == nil:
		return sum
	case b > 0:
		return math.MaxInt64
	default:
		return math.MinInt64
	}
}

// delegatedParts says which part of the buckets' limits was handed out of a
// parent's cap, and by which parent: each contributing grant that is
// delegated, counted once (a delegated amount selects no dimensions, so it
// contributes the same amount to every bucket of the consumer).
func (r *effectiveReconciler) delegatedParts(ctx context.Context, buckets []quotav1alpha1.AllowanceBucket) ([]quotav1alpha1.DelegatedPart, error) {
	seen := map[string]bool{}
	var parts []quotav1alpha1.DelegatedPart
	for _, b := range buckets {
		for _, ref := range b.Status.ContributingGrantRefs {
			id := ledger.GrantID(ref.Namespace, ref.Name, int(ref.BucketIndex))
			if seen[id] {
				continue
			}
			seen[id] = true
			g := &quotav1alpha1.ResourceGrant{}
			if err := r.client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, g); err != nil {
				if apierrors.IsNotFound(err) {
					continue // gone: the bucket's next write drops it
				}
				return nil, err
			}
			if !g.IsDelegated() {
				continue
			}
			parent := g.Spec.DelegatedFrom.ConsumerRef
			name := ref.Namespace + "/" + ref.Name
			i := slices.IndexFunc(parts, func(p quotav1alpha1.DelegatedPart) bool { return p.ConsumerRef == parent })
			if i < 0 {
				parts = append(parts, quotav1alpha1.DelegatedPart{ConsumerRef: parent})
				i = len(parts) - 1
			}
			parts[i].Amount = saturatingAdd(parts[i].Amount, ref.Amount)
			if !slices.Contains(parts[i].Grants, name) {
				parts[i].Grants = append(parts[i].Grants, name)
			}
		}
	}
	slices.SortFunc(parts, func(a, b quotav1alpha1.DelegatedPart) int {
		return strings.Compare(a.ConsumerRef.Kind+"/"+a.ConsumerRef.Name, b.ConsumerRef.Kind+"/"+b.ConsumerRef.Name)
	})
	return parts, nil
}
