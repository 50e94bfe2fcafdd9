package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/grants"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/validation"
)

// +kubebuilder:rbac:groups=quota.miloapis.com,resources=resourceclaims,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=quota.miloapis.com,resources=resourceclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=quota.miloapis.com,resources=resourceclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// claimReconciler decides Allocation claims and returns what they hold.
//
// A claim is judged against the registrations (ValidationFailed), then
// decided by ledger.Reserve under the claim's uid, all or nothing:
// Granted=True/QuotaAvailable holds the amount as a reservation,
// Granted=False/QuotaExceeded holds nothing. The observer counts a Granted
// claim like any other object and folds that reservation into allocated.
// The finalizer is in place before anything is taken, and on deletion
// ledger.Release removes the reservation if the observer has not folded it
// yet, before the finalizer goes; once folded, the claim's amount leaves
// allocated when the observer sees the claim gone. A decided claim (Granted
// condition for its generation) is never decided again: the spec is
// immutable. View claims (v1alpha1.ViewLabel), which the observer writes
// to show what an object counts, are not this controller's: they hold
// nothing.
type claimReconciler struct {
	client          client.Client
	events          events.EventRecorder
	ledger          *ledger.Ledger
	mirror          *grants.Mirror
	systemNamespace string
	concurrency     int
	now             func() metav1.Time
}

func (r *claimReconciler) setup(mgr ctrl.Manager) error {
	r.events = mgr.GetEventRecorder("quotakeeper-claim")
	return ctrl.NewControllerManagedBy(mgr).
		Named("claim").
		// Views are the observer's: they hold nothing and are never decided.
		For(&quotav1alpha1.ResourceClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return !quotav1alpha1.IsView(o.GetLabels())
		}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.concurrency}).
		Complete(r)
}

func (r *claimReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	// Decide and release nothing before the mirror holds every grant: a
	// bucket's limit is the sum of its grants, and a partial sum refuses
	// what fits. Once synced this returns at once.
	if err := grants.WaitForSync(ctx, r.mirror); err != nil {
		return reconcile.Result{}, fmt.Errorf("waiting for the grant mirror to sync: %w", err)
	}
	c := &quotav1alpha1.ResourceClaim{}
	if err := r.client.Get(ctx, req.NamespacedName, c); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if quotav1alpha1.IsView(c.Labels) {
		return reconcile.Result{}, nil
	}
	if c.DeletionTimestamp != nil {
		return reconcile.Result{}, r.release(ctx, c)
	}
	if !controllerutil.ContainsFinalizer(c, quotav1alpha1.ClaimFinalizer) {
		// The mutating webhook adds it; this covers a cluster without it.
		// Nothing is taken until it is stored.
		patch := client.MergeFromWithOptions(c.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(c, quotav1alpha1.ClaimFinalizer)
		if err := r.client.Patch(ctx, c, patch); err != nil {
			return reconcile.Result{}, ignoreConflict(err)
		}
	}
	if c.Decided() {
		return reconcile.Result{}, nil
	}
	return r.decide(ctx, c)
}

func (r *claimReconciler) decide(ctx context.Context, c *quotav1alpha1.ResourceClaim) (reconcile.Result, error) {
	cat, err := validation.LoadCatalog(ctx, r.client)
	if err != nil {
		return reconcile.Result{}, err
	}
	ns, err := validation.GetNamespace(ctx, r.client, c.Namespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	verdict := validation.ValidateClaim(c, cat, ns, r.systemNamespace)
	if len(verdict.Errors) == 0 && len(verdict.Pending) > 0 {
		// A registration not judged yet: deciding now would be a guess.
		// Registrations are judged in moments; look again shortly.
		msg := "waiting for the registration to be judged: " + verdict.Pending[0]
		return reconcile.Result{RequeueAfter: pendingRegistrationRetry}, r.writeStatus(ctx, c, pendingStatus(c, msg, r.now()))
	}
	if len(verdict.Errors) > 0 {
		return reconcile.Result{}, r.writeStatus(ctx, c, invalidStatus(c, verdict.Errors.ToAggregate().Error(), r.now()))
	}
	d, err := r.ledger.Reserve(ctx, ledgerClaim(c))
	var invalid *ledger.ValidationError
	switch {
	case errors.As(err, &invalid):
		return reconcile.Result{}, r.writeStatus(ctx, c, invalidStatus(c, invalid.Error(), r.now()))
	case err != nil:
		// Unknown outcome: retried with backoff, failing closed meanwhile.
		// Reserve is idempotent by claim id, so a retry never holds twice.
		if werr := r.writeStatus(ctx, c, pendingStatus(c, err.Error(), r.now())); werr != nil {
			return reconcile.Result{}, errors.Join(err, werr)
		}
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.writeStatus(ctx, c, decisionStatus(c, d, r.now()))
}

// pendingRegistrationRetry is how soon a claim waiting for its registration
// to be judged is looked at again.
const pendingRegistrationRetry = time.Second

// release removes the claim's reservation, if the observer has not folded
// it yet, and lets the claim go. Release is idempotent, so a crash between
// it and removing the finalizer only repeats it.
func (r *claimReconciler) release(ctx context.Context, c *quotav1alpha1.ResourceClaim) error {
	if !controllerutil.ContainsFinalizer(c, quotav1alpha1.ClaimFinalizer) {
		return nil
	}
	err := r.ledger.Release(ctx, ledgerClaim(c))
	if err != nil && !errors.Is(err, ledger.ErrInvalid) {
		// An invalid claim never took anything: nothing to return.
		return err
	}
	// Optimistic lock: a merge patch replaces the whole finalizer list, and
	// must not drop one another controller added meanwhile.
	patch := client.MergeFromWithOptions(c.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(c, quotav1alpha1.ClaimFinalizer)
	return ignoreConflict(client.IgnoreNotFound(r.client.Patch(ctx, c, patch)))
}

// writeStatus stores st unless the claim already says exactly that. On a
// conflict the claim is reconciled again from the newer version, and a
// decision already taken replays (the ledger is idempotent by claim id).
func (r *claimReconciler) writeStatus(ctx context.Context, c *quotav1alpha1.ResourceClaim, st quotav1alpha1.ResourceClaimStatus) error {
	if quotav1alpha1.SameClaimStatus(c.Status, st) {
		return nil
	}
	c.Status = st
	err := r.client.Status().Update(ctx, c)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		if cond := meta.FindStatusCondition(st.Conditions, quotav1alpha1.ConditionGranted); cond != nil {
			recordCondition(r.events, c, *cond, actionDecide)
		}
	}
	return ignoreConflict(err)
}
