// Package webhooks keeps bad quota objects out: validating webhooks for
// registrations, grants and claims, and the mutating webhook that gives
// every claim its finalizer. The webhooks are adapters: the rules live in
// package validation, which the controllers and quotactl apply too. What is
// the webhooks' own is admission itself: who is asking (only the manager may
// set a claim's reservation-id annotation) and which updates are judged.
package webhooks

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// Options configure the webhooks.
type Options struct {
	// SystemNamespace holds the buckets (and so the grants) of consumers
	// that are neither a namespace nor inside one.
	SystemNamespace string
	// ManagerUsername is the manager's own user name; only it may create
	// claims carrying the reservation-id annotation. Empty means nobody may.
	ManagerUsername string
}

// Setup registers the webhooks on mgr's webhook server. Paths match the
// kubebuilder markers, from which config/webhook is generated.
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.SystemNamespace == "" {
		opts.SystemNamespace = quotav1alpha1.DefaultSystemNamespace
	}
	reader := mgr.GetClient()
	if err := ctrl.NewWebhookManagedBy(mgr, &quotav1alpha1.ResourceRegistration{}).
		WithValidator(RegistrationValidator{}).Complete(); err != nil {
		return fmt.Errorf("registration webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &quotav1alpha1.ResourceGrant{}).
		WithValidator(&GrantValidator{Reader: reader, SystemNamespace: opts.SystemNamespace}).Complete(); err != nil {
		return fmt.Errorf("grant webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &quotav1alpha1.ResourceClaim{}).
		WithValidator(&ClaimValidator{Reader: reader, SystemNamespace: opts.SystemNamespace, ManagerUsername: opts.ManagerUsername}).
		WithDefaulter(ClaimFinalizer{}).Complete(); err != nil {
		return fmt.Errorf("claim webhooks: %w", err)
	}
	return nil
}

// WhoAmI asks the apiserver which user cfg authenticates as (a
// SelfSubjectReview, allowed to every authenticated user), so the manager
// learns its own name without a flag that could drift from its service
// account.
func WhoAmI(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("self subject review: %w", err)
	}
	if review.Status.UserInfo.Username == "" {
		return "", fmt.Errorf("self subject review returned no user name")
	}
	return review.Status.UserInfo.Username, nil
}
