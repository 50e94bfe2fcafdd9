package controllers

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/claimpolicies"
)

// +kubebuilder:rbac:groups=constraints.gatekeeper.sh,resources=quotaclaimpolicy,verbs=get;list;watch;create;update;patch;delete

// templateRecheck is how soon a policy is looked at again when Gatekeeper
// does not serve the QuotaClaimPolicy constraint kind: the template is not
// installed yet, or Gatekeeper has not made its CRD.
const templateRecheck = 15 * time.Second

// claimPolicyFieldOwner is the field manager of the constraints this
// controller applies.
const claimPolicyFieldOwner = "quotakeeper-claimcreationpolicy"

// claimPolicyReconciler keeps one QuotaClaimPolicy constraint per Ready
// ClaimCreationPolicy (claimpolicies.Constraint), and none for a policy that
// is gone or not Ready: Gatekeeper enforces a policy through its constraint,
// and the observer counts existing objects through the same one. The
// constraint kind exists only once the template is installed, so its watch
// (which restores a constraint edited or deleted by hand) starts with the
// first reconcile that finds the kind served.
type claimPolicyReconciler struct {
	client client.Client
	cache  cache.Cache

	ctrl controller.Controller

	mu       sync.Mutex
	watching bool // the constraint watch has started
}

func (r *claimPolicyReconciler) setup(mgr ctrl.Manager) error {
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("claimcreationpolicy-constraint").
		For(&quotav1alpha1.ClaimCreationPolicy{}).
		Build(r)
	r.ctrl = c
	return err
}

func (r *claimPolicyReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &quotav1alpha1.ClaimCreationPolicy{}
	err := r.client.Get(ctx, req.NamespacedName, p)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	if apierrors.IsNotFound(err) || !claimpolicies.Enforced(p) {
		return r.removeConstraint(ctx, req.Name)
	}
	want, err := claimpolicies.Constraint(p)
	if err != nil {
		// The webhook refuses such a policy and the status controller never
		// makes it Ready; nothing to enforce.
		log.FromContext(ctx).Error(err, "ClaimCreationPolicy has no constraint", "policy", p.Name)
		return reconcile.Result{}, nil
	}
	err = r.client.Patch(ctx, want, client.Apply, client.FieldOwner(claimPolicyFieldOwner), client.ForceOwnership)
	if meta.IsNoMatchError(err) {
		log.FromContext(ctx).Info("Gatekeeper does not serve the QuotaClaimPolicy constraint kind (is the template installed?); the policy is not enforced yet", "policy", p.Name)
		return reconcile.Result{RequeueAfter: templateRecheck}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	started, err := r.watchConstraints(ctx)
	if started {
		// A constraint deleted or edited while the new watch was still
		// listing sent it no event: now it has synced, look at this policy
		// once more.
		return reconcile.Result{RequeueAfter: time.Millisecond}, err
	}
	return reconcile.Result{}, err
}

// removeConstraint deletes the constraint of the policy of that name, if
// this controller made it.
func (r *claimPolicyReconciler) removeConstraint(ctx context.Context, policy string) (reconcile.Result, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(claimpolicies.ConstraintGVK)
	err := r.client.Get(ctx, client.ObjectKey{Name: policy}, u)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if !claimpolicies.OwnedConstraint(u, policy) {
		return reconcile.Result{}, nil
	}
	err = r.client.Delete(ctx, u, client.Preconditions{UID: ptr.To(u.GetUID())})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone, or replaced by another object since the read: its own
		// event brings it back here.
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, err
}

// watchConstraints starts, once, the watch on QuotaClaimPolicy constraints
// (a change to one this controller keeps re-applies its policy), and waits
// until it has synced. started says this call started it.
func (r *claimPolicyReconciler) watchConstraints(ctx context.Context) (started bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watching {
		return false, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(claimpolicies.ConstraintGVK)
	src := source.Kind(r.cache, u, handler.TypedEnqueueRequestsFromMapFunc(
		func(_ context.Context, c *unstructured.Unstructured) []reconcile.Request {
			if !claimpolicies.OwnedConstraint(c, c.GetName()) {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: c.GetName()}}}
		}))
	if err := r.ctrl.Watch(src); err != nil {
		return false, err
	}
	r.watching = true // never twice, even if waiting for it fails
	return true, src.WaitForSync(ctx)
}
