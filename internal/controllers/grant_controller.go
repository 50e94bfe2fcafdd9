package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/grants"
	"github.com/quotakeeper/quotakeeper/internal/validation"
)

// +kubebuilder:rbac:groups=quota.miloapis.com,resources=resourcegrants,verbs=get;list;watch
// +kubebuilder:rbac:groups=quota.miloapis.com,resources=resourcegrants/status,verbs=get;update;patch

// grantReconciler judges each grant against the registrations and records
// the verdict in its Active condition. It computes no limits: the grant
// mirror turns Active grants into the ledger's grants, and the bucket
// controller writes the limits they make. It does check that they can be
// computed: a grant whose amounts, with the consumer's other grants that
// count, sum past int64 is not made active (LimitOverflow). The webhook
// checks the same against its cache, but two grants created at once, or
// written while it was absent, pass it; this check is what keeps an
// overflowing set from ever counting.
type grantReconciler struct {
	client          client.Client
	events          events.EventRecorder
	systemNamespace string
}

func (r *grantReconciler) setup(mgr ctrl.Manager) error {
	r.events = mgr.GetEventRecorder("quotakeeper-grant")
	return ctrl.NewControllerManagedBy(mgr).
		Named("grant").
		For(&quotav1alpha1.ResourceGrant{}).
		// A registration appearing, going active or away re-judges its grants.
		Watches(&quotav1alpha1.ResourceRegistration{}, handler.EnqueueRequestsFromMapFunc(r.grantsOfRegistration)).
		// A grant changing or going away may make room for one refused for
		// overflow.
		Watches(&quotav1alpha1.ResourceGrant{}, handler.EnqueueRequestsFromMapFunc(r.overflowedGrants)).
		Complete(r)
}

// overflowedGrants are the other grants of obj's consumer that are inactive
// because of LimitOverflow.
func (r *grantReconciler) overflowedGrants(ctx context.Context, obj client.Object) []reconcile.Request {
	changed := obj.(*quotav1alpha1.ResourceGrant)
	var grants quotav1alpha1.ResourceGrantList
	if err := r.client.List(ctx, &grants, client.InNamespace(changed.Namespace)); err != nil {
		log.FromContext(ctx).Error(err, "list grants of consumer", "grant", changed.Name)
		return nil
	}
	var out []reconcile.Request
	for _, g := range grants.Items {
		c := meta.FindStatusCondition(g.Status.Conditions, quotav1alpha1.ConditionActive)
		if g.Name != changed.Name && g.Spec.ConsumerRef == changed.Spec.ConsumerRef && c != nil && c.Reason == quotav1alpha1.ReasonLimitOverflow {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&g)})
		}
	}
	return out
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
	} else {
		errs, err := r.totalErrors(ctx, g)
		if err != nil {
			return reconcile.Result{}, err
		}
		if len(errs) > 0 {
			cond.Status, cond.Reason = metav1.ConditionFalse, quotav1alpha1.ReasonLimitOverflow
			cond.Message = errs.ToAggregate().Error()
		}
	}
	if g.Status.ObservedGeneration == g.Generation && !conditionDiffers(g.Status.Conditions, cond) {
		return reconcile.Result{}, nil
	}
	g.Status.ObservedGeneration = g.Generation
	changed := conditionDiffers(g.Status.Conditions, cond)
	meta.SetStatusCondition(&g.Status.Conditions, cond)
	if err := r.client.Status().Update(ctx, g); err != nil {
		return reconcile.Result{}, ignoreConflict(err)
	}
	if changed {
		recordCondition(r.events, g, cond, actionJudge)
	}
	return reconcile.Result{}, nil
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

// totalErrors checks g's amounts against the other grants of its consumer
// that count: the Active ones. A grant not yet active also counts the ones
// not judged at their current generation, since the cache may not show a
// verdict just written: two grants judged one after the other must not both
// pass. A grant already active does not count those, so the grants that
// count stay active and a newcomer that would overflow them is the one
// refused.
func (r *grantReconciler) totalErrors(ctx context.Context, g *quotav1alpha1.ResourceGrant) (field.ErrorList, error) {
	var all quotav1alpha1.ResourceGrantList
	if err := r.client.List(ctx, &all, client.InNamespace(g.Namespace)); err != nil {
		return nil, err
	}
	active := grants.Active(g)
	others := slices.DeleteFunc(all.Items, func(o quotav1alpha1.ResourceGrant) bool {
		counts := grants.Active(&o) || (!active && !grants.Evaluated(&o))
		return o.Name == g.Name || !counts
	})
	return validation.ValidateGrantTotals(g, others), nil
}
