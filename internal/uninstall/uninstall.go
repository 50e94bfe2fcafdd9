// Package uninstall removes what quotakeeper leaves in a cluster that Helm
// does not own, in the one order that cannot get stuck. It is the chart's
// pre-delete hook (`quotakeeper-manager uninstall`, docs/operations.md,
// "Uninstalling"):
//
//  1. The manager's Deployment goes first, and its pods with it: a running
//     controller would put a finalizer back on what step 4 strips.
//  2. The webhook configurations go next. Their failurePolicy is Fail and
//     their backend is the manager just stopped: left in place, they would
//     refuse the writes that remove the finalizers (and every later write
//     of a quota object).
//  3. Every QuotaBypass restores the constraints it relaxed, as its
//     controller would on expiry, and loses its finalizer.
//  4. Every ResourceClaim loses the claim finalizer. Nothing would ever
//     remove it with the manager gone, and a finalized claim keeps its
//     namespace Terminating for good.
//  5. The objects the manager wrote itself go: the webhook certificate's
//     Secret, the leader-election Lease, the counted-policies ConfigMap.
//  6. The aggregated ClusterRole of the kinds the manager counts goes
//     before Helm deletes the ClusterRoles it aggregates. Helm deletes a
//     release's ClusterRoles all at once; kube-controller-manager's
//     aggregation controller, seeing one it aggregates go while the
//     aggregate is still in its cache, writes the aggregate's new rules
//     with a forced server-side apply, which creates it again when Helm's
//     delete came first: a ClusterRole no release owns, on which the next
//     helm install fails ("invalid ownership metadata"). Gone first, it is
//     in no cache by then, and nothing writes it.
//
// The CRDs and the quota objects themselves stay (the chart keeps its CRDs:
// deleting them would delete every grant), so a reinstall takes up where
// the uninstall left off. Each step is idempotent: a hook run again after
// a failure repeats what is done and finishes the rest.
package uninstall

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/bypass"
	"github.com/quotakeeper/quotakeeper/internal/counted"
)

// Options name the objects of one installation (the chart's values).
type Options struct {
	// Namespace is the release's: the manager's Deployment, the webhook
	// certificate's Secret and the leader-election Lease are there.
	Namespace string
	// SystemNamespace holds the counted-policies ConfigMap.
	SystemNamespace string
	// Deployment is the manager's Deployment.
	Deployment string
	// ValidatingWebhookConfiguration and MutatingWebhookConfiguration are
	// the manager's webhook configurations.
	ValidatingWebhookConfiguration, MutatingWebhookConfiguration string
	// WebhookSecret holds the webhook certificate the manager rotated.
	WebhookSecret string
	// LeaderElectionID is the manager's leader-election Lease.
	LeaderElectionID string
	// CountedKindsRole is the aggregated ClusterRole of the kinds the
	// manager counts; empty, the step is left out.
	CountedKindsRole string
	// PodsGoneTimeout bounds the wait for the manager's pods to end.
	PodsGoneTimeout time.Duration
	Log             logr.Logger
}

// Run removes an installation's leftovers in the package's order. c must
// read live (not from a cache): each step acts on what the API server has.
func Run(ctx context.Context, c client.Client, o Options) error {
	if err := stopManager(ctx, c, o); err != nil {
		return fmt.Errorf("stop the manager: %w", err)
	}
	for _, obj := range []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: o.ValidatingWebhookConfiguration}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: o.MutatingWebhookConfiguration}},
	} {
		if err := deleteObject(ctx, c, obj, o.Log); err != nil {
			return err
		}
	}
	if err := endBypasses(ctx, c, o.Log); err != nil {
		return fmt.Errorf("end QuotaBypasses: %w", err)
	}
	if err := releaseClaims(ctx, c, o.Log); err != nil {
		return fmt.Errorf("remove ResourceClaim finalizers: %w", err)
	}
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.WebhookSecret}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.LeaderElectionID}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: o.SystemNamespace, Name: counted.ConfigMapName}},
	} {
		if err := deleteObject(ctx, c, obj, o.Log); err != nil {
			return err
		}
	}
	if o.CountedKindsRole != "" {
		return deleteObject(ctx, c, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: o.CountedKindsRole}}, o.Log)
	}
	return nil
}

// stopManager deletes the manager's Deployment and waits until no pod of
// its selector is left: a pod in its grace period still reconciles.
func stopManager(ctx context.Context, c client.Client, o Options) error {
	var d appsv1.Deployment
	err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Deployment}, &d)
	if apierrors.IsNotFound(err) {
		o.Log.Info("no manager Deployment", "namespace", o.Namespace, "name", o.Deployment)
		return nil
	}
	if err != nil {
		return err
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return err
	}
	if err := deleteObject(ctx, c, &d, o.Log); err != nil {
		return err
	}
	var left int
	err = wait.PollUntilContextTimeout(ctx, time.Second, o.PodsGoneTimeout, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(o.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return false, err
		}
		left = len(pods.Items)
		return left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d manager pod(s) still running after %v: %w", left, o.PodsGoneTimeout, err)
	}
	return nil
}

// endBypasses restores what every QuotaBypass relaxed (no bypass inherits
// a constraint: all of them end) and removes its finalizer.
func endBypasses(ctx context.Context, c client.Client, log logr.Logger) error {
	var list quotav1alpha1.QuotaBypassList
	if err := c.List(ctx, &list); err != nil {
		return ignoreNoKind(err)
	}
	for i := range list.Items {
		b := &list.Items[i]
		if err := bypass.Restore(ctx, c, c, b, nil, time.Now()); err != nil {
			return err
		}
		if err := removeFinalizer(ctx, c, b, quotav1alpha1.BypassFinalizer); err != nil {
			return err
		}
		log.Info("QuotaBypass ended: constraints restored", "bypass", b.Name)
	}
	return nil
}

// releaseClaims removes the claim finalizer from every ResourceClaim that
// has it.
func releaseClaims(ctx context.Context, c client.Client, log logr.Logger) error {
	var list quotav1alpha1.ResourceClaimList
	if err := c.List(ctx, &list); err != nil {
		return ignoreNoKind(err)
	}
	n := 0
	for i := range list.Items {
		claim := &list.Items[i]
		if !controllerutil.ContainsFinalizer(claim, quotav1alpha1.ClaimFinalizer) {
			continue
		}
		if err := removeFinalizer(ctx, c, claim, quotav1alpha1.ClaimFinalizer); err != nil {
			return err
		}
		n++
	}
	log.Info("ResourceClaim finalizers removed", "claims", n)
	return nil
}

// removeFinalizer removes one finalizer, re-reading the object on a
// conflict. A deleted object is done.
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		if !controllerutil.RemoveFinalizer(obj, finalizer) {
			return nil
		}
		return c.Update(ctx, obj)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// deleteObject deletes obj, which may already be gone.
func deleteObject(ctx context.Context, c client.Client, obj client.Object, log logr.Logger) error {
	err := c.Delete(ctx, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	log.Info("deleted", "kind", fmt.Sprintf("%T", obj), "namespace", obj.GetNamespace(), "name", obj.GetName())
	return nil
}

// ignoreNoKind treats a kind the API server does not serve (its CRD was
// removed by hand) as having no objects.
func ignoreNoKind(err error) error {
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return nil
	}
	var noKind *meta.NoKindMatchError
	if errors.As(err, &noKind) {
		return nil
	}
	return err
}
