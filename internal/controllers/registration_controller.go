package controllers

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// +kubebuilder:rbac:groups=quota.miloapis.com,resources=resourceregistrations,verbs=get;list;watch
// +kubebuilder:rbac:groups=quota.miloapis.com,resources=resourceregistrations/status,verbs=get;update;patch

// registrationReconciler sets each registration's Active condition. One
// resource type has one active registration: the one already active, else
// the oldest (then by name). Every other is refused, and takes over when the
// active one is deleted.
type registrationReconciler struct {
	client client.Client
}

func (r *registrationReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("registration").
		For(&quotav1alpha1.ResourceRegistration{}).
		// A change to one registration can change which of its peers wins.
		Watches(&quotav1alpha1.ResourceRegistration{}, handler.EnqueueRequestsFromMapFunc(r.peers)).
		Complete(r)
}

func (r *registrationReconciler) peers(ctx context.Context, obj client.Object) []reconcile.Request {
	reg := obj.(*quotav1alpha1.ResourceRegistration)
	var list quotav1alpha1.ResourceRegistrationList
	if err := r.client.List(ctx, &list); err != nil {
		// A map function cannot return an error to be retried: the peers
		// keep their condition until their next event.
		log.FromContext(ctx).Error(err, "list registrations: peers not re-evaluated", "registration", reg.Name, "resourceType", reg.Spec.ResourceType)
		return nil
	}
	var out []reconcile.Request
	for _, p := range list.Items {
		if p.Spec.ResourceType == reg.Spec.ResourceType && p.Name != reg.Name {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: p.Name}})
		}
	}
	return out
}

func (r *registrationReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	reg := &quotav1alpha1.ResourceRegistration{}
	if err := r.client.Get(ctx, req.NamespacedName, reg); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if reg.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	var list quotav1alpha1.ResourceRegistrationList
	if err := r.client.List(ctx, &list); err != nil {
		return reconcile.Result{}, err
	}
	winner := activeRegistration(list.Items, reg.Spec.ResourceType)
	cond := metav1.Condition{
		Type: quotav1alpha1.ConditionActive, Status: metav1.ConditionTrue, ObservedGeneration: reg.Generation,
		Reason: quotav1alpha1.ReasonRegistrationActive, Message: fmt.Sprintf("resource type %q is registered", reg.Spec.ResourceType),
	}
	if winner != nil && winner.Name != reg.Name {
		cond.Status, cond.Reason = metav1.ConditionFalse, quotav1alpha1.ReasonAlreadyRegistered
		cond.Message = "already registered by " + winner.Name
	}
	if reg.Status.ObservedGeneration == reg.Generation && !conditionDiffers(reg.Status.Conditions, cond) {
		return reconcile.Result{}, nil
	}
	reg.Status.ObservedGeneration = reg.Generation
	meta.SetStatusCondition(&reg.Status.Conditions, cond)
	return reconcile.Result{}, ignoreConflict(r.client.Status().Update(ctx, reg))
}

// activeRegistration picks the registration of resourceType that should be
// active: among those not being deleted, one already active first, then the
// oldest, then by name. The order never demotes an active registration for
// a newcomer, and two active at once (caches raced) settle on one.
func activeRegistration(regs []quotav1alpha1.ResourceRegistration, resourceType string) *quotav1alpha1.ResourceRegistration {
	var peers []*quotav1alpha1.ResourceRegistration
	for i := range regs {
		if regs[i].Spec.ResourceType == resourceType && regs[i].DeletionTimestamp == nil {
			peers = append(peers, &regs[i])
		}
	}
	if len(peers) == 0 {
		return nil
	}
	active := func(r *quotav1alpha1.ResourceRegistration) int {
		if meta.IsStatusConditionTrue(r.Status.Conditions, quotav1alpha1.ConditionActive) {
			return 0
		}
		return 1
	}
	return slices.MinFunc(peers, func(a, b *quotav1alpha1.ResourceRegistration) int {
		return cmp.Or(
			cmp.Compare(active(a), active(b)),
			a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
			cmp.Compare(a.Name, b.Name),
		)
	})
}

// conditionDiffers reports whether setting want would change conds (other
// than the transition time).
func conditionDiffers(conds []metav1.Condition, want metav1.Condition) bool {
	have := meta.FindStatusCondition(conds, want.Type)
	return have == nil || have.Status != want.Status || have.Reason != want.Reason ||
		have.Message != want.Message || have.ObservedGeneration != want.ObservedGeneration
}
