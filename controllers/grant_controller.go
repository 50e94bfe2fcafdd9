package controllers

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/validation"
)

// +kubebuilder:rbac:groups=quota.miloapis.com,resources=resourcegrants,verbs=get;list;watch
// +kubebuilder:rbac:groups=quota.miloapis.com,resources=resourcegrants/status,verbs=get;update;patch

// grantReconciler judges each grant against the registrations and records
// the verdict in its Active condition. It computes no limits: the grant
// mirror turns Active grants into the ledger's grants, and the bucket
// controller writes the limits they make.
type grantReconciler struct {
	client          client.Client
	systemNamespace string
}

func (r *grantReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("grant").
		For(&quotav1alpha1.ResourceGrant{}).
		// A registration appearing, going active or away re-judges its grants.
		Watches(&quotav1alpha1.ResourceRegistration{}, handler.EnqueueRequestsFromMapFunc(r.grantsOfRegistration)).
		Complete(r)
}

func (r *grantReconciler) grantsOfRegistration(ctx context.Context, obj client.Object) []reconcile.Request {
	reg := obj.(*quotav1alpha1.ResourceRegistration)
	var grants quotav1alpha1.ResourceGrantList
	if err := r.client.List(ctx, &grants, client.MatchingFields{indexGrantResourceType: reg.Spec.ResourceType}); err != nil {
		log.FromContext(ctx).Error(err, "list grants of registration", "registration", reg.Name)
		return nil
	}
	out := make([]reconcile.Request, len(grants.Items))
	for i, g := range grants.Items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&g)}
	}
	return out
}

func (r *grantReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	g := &quotav1alpha1.ResourceGrant{}
	if err := r.client.Get(ctx, req.NamespacedName, g); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if g.DeletionTimestamp != nil {
		return reconcile.Result{}, nil // the mirror drops it when it is gone
	}
	cat, err := validation.LoadCatalog(ctx, r.client)
	if err != nil {
		return reconcile.Result{}, err
	}
	verdict := validation.ValidateGrant(g, cat, r.systemNamespace)
	if len(verdict.Errors) == 0 && len(verdict.Pending) > 0 {
		// Judge the grant once its registration is judged (that event
		// brings us back); until then the mirror keeps what it had.
		return reconcile.Result{}, nil
	}
	cond := metav1.Condition{
		Type: quotav1alpha1.ConditionActive, Status: metav1.ConditionTrue, ObservedGeneration: g.Generation,
		Reason: quotav1alpha1.ReasonGrantActive, Message: activeGrantMessage(g),
	}
	if len(verdict.Errors) > 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, quotav1alpha1.ReasonValidationFailed
		cond.Message = verdict.Errors.ToAggregate().Error()
	}
	if g.Status.ObservedGeneration == g.Generation && !conditionDiffers(g.Status.Conditions, cond) {
		return reconcile.Result{}, nil
	}
	g.Status.ObservedGeneration = g.Generation
	meta.SetStatusCondition(&g.Status.Conditions, cond)
	return reconcile.Result{}, ignoreConflict(r.client.Status().Update(ctx, g))
}

func activeGrantMessage(g *quotav1alpha1.ResourceGrant) string {
	parts := make([]string, len(g.Spec.Allowances))
	for i, a := range g.Spec.Allowances {
		amounts := make([]string, len(a.Buckets))
		for j, b := range a.Buckets {
			amounts[j] = fmt.Sprint(b.Amount)
		}
		parts[i] = fmt.Sprintf("%s %s", a.ResourceType, strings.Join(amounts, "+"))
	}
	return "grants " + strings.Join(parts, ", ")
}
