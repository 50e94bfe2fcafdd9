package controllers

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/bypass"
)

// +kubebuilder:rbac:groups=quota.miloapis.com,resources=quotabypasses,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=quota.miloapis.com,resources=quotabypasses/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=constraints.gatekeeper.sh,resources=*,verbs=get;list;watch;update;patch

// bypassRecheck is how often an active bypass relaxes its constraints
// again: a constraint created, or set back to deny, during the bypass is
// relaxed within this time.
const bypassRecheck = 30 * time.Second

// bypassReconciler carries out QuotaBypasses: while one is active it holds
// its constraints at warn (package bypass); when it expires or is deleted
// it restores them, then reports Active False (Expired) or lets the
// deletion finish. Expiry is a fact of the object (creation plus duration),
// so the reconcile is requeued for that moment.
type bypassReconciler struct {
	client client.Client
	// reader reads constraints uncached: a bypass is rare, and each of the
	// many constraint kinds would otherwise need an informer.
	reader client.Reader
	events events.EventRecorder
	now    func() time.Time
}

func (r *bypassReconciler) setup(mgr ctrl.Manager) error {
	r.reader = mgr.GetAPIReader()
	r.events = mgr.GetEventRecorder("quotakeeper-bypass")
	return ctrl.NewControllerManagedBy(mgr).
		Named("quotabypass").
		For(&quotav1alpha1.QuotaBypass{}).
		Complete(r)
}

func (r *bypassReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var b quotav1alpha1.QuotaBypass
	if err := r.client.Get(ctx, req.NamespacedName, &b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.now()
	if !b.ActiveAt(now) {
		return ctrl.Result{}, r.end(ctx, &b, now)
	}
	if controllerutil.AddFinalizer(&b, quotav1alpha1.BypassFinalizer) {
		// Before relaxing anything: the finalizer is what guarantees a
		// deletion restores.
		if err := r.client.Update(ctx, &b); err != nil {
			return ctrl.Result{}, ignoreConflict(err)
		}
	}
	relaxed, err := bypass.Relax(ctx, r.reader, r.client, &b)
	if err != nil {
		return ctrl.Result{}, ignoreConflict(err)
	}
	msg := fmt.Sprintf("quota denials of %d constraint(s) are warnings until %s: %s",
		len(relaxed), b.ExpiresAt().UTC().Format(time.RFC3339), b.Spec.Reason)
	if err := r.setStatus(ctx, &b, relaxed, metav1.ConditionTrue, quotav1alpha1.ReasonBypassActive, msg); err != nil {
		return ctrl.Result{}, ignoreConflict(err)
	}
	return ctrl.Result{RequeueAfter: min(b.ExpiresAt().Sub(now), bypassRecheck)}, nil
}

// end restores b's constraints, then reports it expired or lets its
// deletion finish.
func (r *bypassReconciler) end(ctx context.Context, b *quotav1alpha1.QuotaBypass, now time.Time) error {
	var others quotav1alpha1.QuotaBypassList
	if err := r.client.List(ctx, &others); err != nil {
		return err
	}
	if err := bypass.Restore(ctx, r.reader, r.client, b, others.Items, now); err != nil {
		return ignoreConflict(err)
	}
	if b.DeletionTimestamp == nil {
		msg := fmt.Sprintf("ended at %s; the constraints deny again", b.ExpiresAt().UTC().Format(time.RFC3339))
		if err := r.setStatus(ctx, b, nil, metav1.ConditionFalse, quotav1alpha1.ReasonBypassExpired, msg); err != nil {
			return ignoreConflict(err)
		}
	}
	if controllerutil.RemoveFinalizer(b, quotav1alpha1.BypassFinalizer) {
		if err := r.client.Update(ctx, b); err != nil && !apierrors.IsNotFound(err) {
			return ignoreConflict(err)
		}
		log.FromContext(ctx).Info("QuotaBypass ended; constraints restored", "bypass", b.Name, "reason", b.Spec.Reason)
	}
	return nil
}

// setStatus writes the status when it changes, recording the Active
// condition as an Event when it does.
func (r *bypassReconciler) setStatus(ctx context.Context, b *quotav1alpha1.QuotaBypass, relaxed []quotav1alpha1.RelaxedConstraint,
	status metav1.ConditionStatus, reason, msg string) error {
	before := b.Status.DeepCopy()
	expires := metav1.NewTime(b.ExpiresAt())
	b.Status.ExpiresAt = &expires
	b.Status.ObservedGeneration = b.Generation
	b.Status.Relaxed = relaxed
	cond := metav1.Condition{Type: quotav1alpha1.ConditionActive, Status: status, Reason: reason, Message: msg, ObservedGeneration: b.Generation}
	changed := meta.SetStatusCondition(&b.Status.Conditions, cond)
	if !changed && equalStatus(before, &b.Status) {
		return nil
	}
	if err := r.client.Status().Update(ctx, b); err != nil {
		return err
	}
	if changed {
		recordCondition(r.events, b, cond, "Bypass")
	}
	return nil
}

func equalStatus(a, b *quotav1alpha1.QuotaBypassStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || !a.ExpiresAt.Equal(b.ExpiresAt) || len(a.Relaxed) != len(b.Relaxed) {
		return false
	}
	for i := range a.Relaxed {
		if a.Relaxed[i] != b.Relaxed[i] {
			return false
		}
	}
	return true
}
