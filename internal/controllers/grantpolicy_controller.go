package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/celpolicy"
	"github.com/quotakeeper/quotakeeper/internal/dynwatch"
)

// The GrantCreationPolicy controller reads every policy's trigger and
// parent kinds, which are only known at run time: through the aggregated
// ClusterRole quotakeeper-manager-counted-kinds, as the observer reads the
// kinds it counts (config/rbac/counted_kinds.yaml). It writes the grants and
// the events about them, in any namespace.
// +kubebuilder:rbac:groups=quota.miloapis.com,resources=resourcegrants,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// grantPolicyWork is one unit of the GrantCreationPolicy controller's
// work: a policy (Trigger zero: start or stop its watches, and look again
// at each of its triggers and grants), or one trigger of a policy (create,
// update or delete the grants the policy made for it).
type grantPolicyWork struct {
	Policy  string
	Trigger triggerKey
}

// triggerKey names one trigger object; the policy says its kind. The uid
// tells a trigger from a later one of the same name.
type triggerKey struct {
	Namespace, Name string
	UID             types.UID
}

// String is the key's namespace/name, or name when cluster-scoped: the
// value of the grant's trigger annotation.
func (k triggerKey) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

func triggerKeyOf(obj client.Object) triggerKey {
	return triggerKey{Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
}

// grantPolicyReconciler is the GrantCreationPolicy controller. For each
// Ready policy it watches the trigger kind (and the parent kind) through
// informers of its own (package dynwatch), started and stopped as policies
// come, change and go; several policies share a kind's informer. For each
// trigger it renders the policy (package celpolicy) and keeps exactly the
// rendered grant, or none when a condition does not hold, the parent is
// missing, or the trigger is gone (grantpolicy_grants.go).
//
// A policy that is deleted, disabled or not Ready stops its watches and
// leaves the grants it made, as Milo does: removing a policy must not take
// quota away from every tenant at once. Those grants still go with their
// trigger through its owner reference; re-enabling the policy adopts them
// again and deletes those whose trigger is gone.
type grantPolicyReconciler struct {
	client          client.Client
	live            client.Reader // the API server, where the cache may be behind
	mapper          meta.RESTMapper
	watches         *dynwatch.Watches
	events          events.EventRecorder
	systemNamespace string

	// queue is the controller's, set when the controller starts (before
	// any reconcile, so before any informer handler can run).
	queue workqueue.TypedRateLimitingInterface[grantPolicyWork]

	mu sync.Mutex
	// policies holds what each watching policy was compiled to, and the
	// kinds it watches.
	policies map[string]*watchingPolicy
}

// watchingPolicy is a Ready policy the controller acts on.
type watchingPolicy struct {
	uid        types.UID
	generation int64
	compiled   *celpolicy.GrantPolicy
	trigger    schema.GroupVersionKind
	parent     *schema.GroupVersionKind
}

// grantPolicyController names the controller, its events and its field
// manager.
const grantPolicyController = "quotakeeper-grant-policy"

func (r *grantPolicyReconciler) setup(mgr ctrl.Manager) error {
	w, err := dynwatch.New(mgr)
	if err != nil {
		return err
	}
	r.watches, r.live, r.mapper = w, mgr.GetAPIReader(), mgr.GetRESTMapper()
	r.events = mgr.GetEventRecorder(grantPolicyController)
	r.policies = map[string]*watchingPolicy{}
	return builder.TypedControllerManagedBy[grantPolicyWork](mgr).
		Named("grantcreation").
		Watches(&quotav1alpha1.GrantCreationPolicy{}, handler.TypedEnqueueRequestsFromMapFunc(
			func(_ context.Context, o client.Object) []grantPolicyWork {
				return []grantPolicyWork{{Policy: o.GetName()}}
			})).
		// A grant edited or deleted by hand is put back.
		Watches(&quotav1alpha1.ResourceGrant{}, handler.TypedEnqueueRequestsFromMapFunc(
			func(_ context.Context, o client.Object) []grantPolicyWork { return workOfGrant(o) })).
		WatchesRawSource(source.TypedFunc[grantPolicyWork](func(_ context.Context, q workqueue.TypedRateLimitingInterface[grantPolicyWork]) error {
			r.queue = q
			return nil
		})).
		WithOptions(controller.TypedOptions[grantPolicyWork]{MaxConcurrentReconciles: 4}).
		WithLogConstructor(func(w *grantPolicyWork) logr.Logger {
			l := mgr.GetLogger().WithValues("controller", "grantcreation")
			if w == nil {
				return l
			}
			l = l.WithValues("policy", w.Policy)
			if w.Trigger != (triggerKey{}) {
				l = l.WithValues("trigger", w.Trigger.String(), "triggerUID", w.Trigger.UID)
			}
			return l
		}).
		Complete(r)
}

// workOfGrant is the trigger work of a grant a policy made.
func workOfGrant(o client.Object) []grantPolicyWork {
	policy, uid := o.GetLabels()[quotav1alpha1.LabelPolicy], o.GetLabels()[quotav1alpha1.LabelTriggerUID]
	ref, ok := o.GetAnnotations()[quotav1alpha1.AnnotationTrigger]
	if policy == "" || uid == "" || !ok {
		return nil
	}
	ns, name, err := toolscache.SplitMetaNamespaceKey(ref)
	if err != nil || name == "" {
		return nil
	}
	return []grantPolicyWork{{Policy: policy, Trigger: triggerKey{Namespace: ns, Name: name, UID: types.UID(uid)}}}
}

func (r *grantPolicyReconciler) Reconcile(ctx context.Context, w grantPolicyWork) (reconcile.Result, error) {
	if w.Trigger == (triggerKey{}) {
		return reconcile.Result{}, r.reconcilePolicy(ctx, w.Policy)
	}
	return reconcile.Result{}, r.reconcileTrigger(ctx, w.Policy, w.Trigger)
}

// activePolicy returns the policy when it exists and is Ready for its
// current generation; nil otherwise.
func (r *grantPolicyReconciler) activePolicy(ctx context.Context, name string) (*quotav1alpha1.GrantCreationPolicy, error) {
	p := &quotav1alpha1.GrantCreationPolicy{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if p.DeletionTimestamp != nil || p.Spec.Disabled || !quotav1alpha1.IsTrue(p.Status.Conditions, quotav1alpha1.ConditionReady, p.Generation) {
		return nil, nil
	}
	return p, nil
}

// compile returns what the policy compiles to, from the last compile when
// its generation is the same.
func (r *grantPolicyReconciler) compile(p *quotav1alpha1.GrantCreationPolicy) (*watchingPolicy, error) {
	if wp := r.policyWatching(p.Name); wp != nil && wp.uid == p.UID && wp.generation == p.Generation {
		return wp, nil
	}
	g, errs := celpolicy.CompileGrantPolicy(p)
	if len(errs) > 0 {
		// Ready says it compiles; this is a policy stored before the
		// webhook existed, which the status controller reports.
		return nil, errs.ToAggregate()
	}
	wp := &watchingPolicy{uid: p.UID, generation: p.Generation, compiled: g, trigger: g.Trigger()}
	if gk, ok := g.Parent(); ok {
		mapping, err := r.mapper.RESTMapping(gk)
		if err != nil {
			return nil, &parentKindError{kind: gk, err: err}
		}
		wp.parent = &mapping.GroupVersionKind
	}
	return wp, nil
}

// parentKindError is a parent kind the REST mapper does not know (yet).
type parentKindError struct {
	kind schema.GroupKind
	err  error
}

func (e *parentKindError) Error() string {
	return fmt.Sprintf("cannot watch the parent kind %s: %v", e.kind, e.err)
}
func (e *parentKindError) Unwrap() error { return e.err }

// reconcilePolicy keeps a policy's watches and puts each of its triggers
// and grants in the queue, so every grant is judged against the policy as
// it is now.
func (r *grantPolicyReconciler) reconcilePolicy(ctx context.Context, name string) error {
	p, err := r.activePolicy(ctx, name)
	if err != nil {
		return err
	}
	if p == nil {
		r.stopPolicy(name)
		return nil
	}
	wp, err := r.compile(p)
	var unmapped *parentKindError
	if errors.As(err, &unmapped) {
		// Ready says the server serves the kind; the mapper, which
		// rereads discovery on a miss, may be a moment behind: retry.
		r.stopPolicy(name)
		r.policyEvent(p, nil, eventWarning, reasonWatchFailed, "Watch", err.Error())
		return err
	}
	if err != nil {
		r.stopPolicy(name)
		r.policyEvent(p, nil, eventWarning, reasonGrantFailed, "Compile", err.Error())
		return nil
	}
	if err := r.watchPolicy(ctx, p, wp); err != nil {
		r.policyEvent(p, nil, eventWarning, reasonWatchFailed, "Watch", err.Error())
		return err
	}

	triggers := &unstructured.UnstructuredList{}
	triggers.SetGroupVersionKind(wp.trigger.GroupVersion().WithKind(wp.trigger.Kind + "List"))
	if err := r.watches.Reader().List(ctx, triggers); err != nil {
		return err
	}
	for i := range triggers.Items {
		r.queue.Add(grantPolicyWork{Policy: name, Trigger: triggerKeyOf(&triggers.Items[i])})
	}
	// Grants whose trigger is gone (deleted while the policy was not
	// watching) have no trigger to bring them up.
	var grants quotav1alpha1.ResourceGrantList
	if err := r.client.List(ctx, &grants, client.MatchingFields{indexGrantPolicy: name}); err != nil {
		return err
	}
	for i := range grants.Items {
		for _, w := range workOfGrant(&grants.Items[i]) {
			r.queue.Add(w)
		}
	}
	return nil
}

// Watch users: a policy watches its trigger kind and its parent kind under
// names of its own, so its handlers come and go without touching another
// policy's on the same kind.
func triggerUser(policy string) string { return policy + "/trigger" }
func parentUser(policy string) string  { return policy + "/parent" }

// watchPolicy starts the policy's watches, stops the ones it no longer
// needs (its kinds changed), and records what it was compiled to.
func (r *grantPolicyReconciler) watchPolicy(ctx context.Context, p *quotav1alpha1.GrantCreationPolicy, wp *watchingPolicy) error {
	name := p.Name
	r.mu.Lock()
	old := r.policies[name]
	r.mu.Unlock()
	if old != nil && old.trigger != wp.trigger {
		r.watches.Unwatch(old.trigger, triggerUser(name))
	}
	if old != nil && old.parent != nil && (wp.parent == nil || *old.parent != *wp.parent) {
		r.watches.Unwatch(*old.parent, parentUser(name))
	}
	// Record the policy first: a handler's first events only need its name,
	// but the trigger work they start reads the compiled policy.
	r.mu.Lock()
	r.policies[name] = wp
	r.mu.Unlock()
	if err := r.watches.Watch(ctx, wp.trigger, triggerUser(name), r.triggerHandler(name)); err != nil {
		return fmt.Errorf("cannot watch the trigger kind: %w", err)
	}
	if wp.parent != nil {
		if err := r.watches.Watch(ctx, *wp.parent, parentUser(name), r.parentHandler(name)); err != nil {
			return fmt.Errorf("cannot watch the parent kind: %w", err)
		}
	}
	return nil
}

// stopPolicy stops the policy's watches and forgets it.
func (r *grantPolicyReconciler) stopPolicy(name string) {
	r.mu.Lock()
	wp := r.policies[name]
	delete(r.policies, name)
	r.mu.Unlock()
	if wp == nil {
		return
	}
	r.watches.Unwatch(wp.trigger, triggerUser(name))
	if wp.parent != nil {
		r.watches.Unwatch(*wp.parent, parentUser(name))
	}
}

// triggerHandler puts every change of a trigger in the queue as the
// policy's work.
func (r *grantPolicyReconciler) triggerHandler(policy string) toolscache.ResourceEventHandler {
	add := func(obj any) {
		if o := unwrapObject(obj); o != nil {
			r.queue.Add(grantPolicyWork{Policy: policy, Trigger: triggerKeyOf(o)})
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: add,
		UpdateFunc: func(oldObj, newObj any) {
			o, n := unwrapObject(oldObj), unwrapObject(newObj)
			if o != nil && n != nil && o.GetResourceVersion() != n.GetResourceVersion() {
				add(newObj)
			}
		},
		DeleteFunc: add,
	}
}

// parentHandler looks at all the policy's triggers again when a parent
// appears or goes: which triggers name it is only known by rendering them.
// Updates of a parent change nothing: only its existence counts.
func (r *grantPolicyReconciler) parentHandler(policy string) toolscache.ResourceEventHandler {
	all := func(any) { r.queue.Add(grantPolicyWork{Policy: policy}) }
	return toolscache.ResourceEventHandlerFuncs{AddFunc: all, DeleteFunc: all}
}

func unwrapObject(x any) client.Object {
	if d, ok := x.(toolscache.DeletedFinalStateUnknown); ok {
		x = d.Obj
	}
	o, _ := x.(client.Object)
	return o
}

// policyWatching returns what the policy was compiled to while it watches.
func (r *grantPolicyReconciler) policyWatching(name string) *watchingPolicy {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.policies[name]
}
