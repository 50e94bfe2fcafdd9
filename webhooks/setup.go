// Package webhooks keeps bad quota objects out: validating webhooks for
// registrations, grants, claims and creation policies, and the mutating
// webhook that gives every claim its finalizer. The webhooks are adapters: the rules live in
// package validation, which the controllers and quotactl apply too. What is
// the webhooks' own is admission itself: which operations are judged.
package webhooks

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// Options configure the webhooks.
type Options struct {
	// SystemNamespace holds the buckets (and so the grants) of consumers
	// that are neither a namespace nor inside one.
	SystemNamespace string
}

// Setup registers the webhooks on mgr's webhook server. Paths match the
// kubebuilder markers, from which config/webhook is generated.
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.SystemNamespace == "" {
		opts.SystemNamespace = quotav1alpha1.DefaultSystemNamespace
	}
	reader := mgr.GetClient()
	if err := ctrl.NewWebhookManagedBy(mgr, &quotav1alpha1.ResourceRegistration{}).
		WithValidator(RegistrationValidator{Reader: reader}).Complete(); err != nil {
		return fmt.Errorf("registration webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &quotav1alpha1.ResourceGrant{}).
		WithValidator(&GrantValidator{Reader: reader, SystemNamespace: opts.SystemNamespace}).Complete(); err != nil {
		return fmt.Errorf("grant webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &quotav1alpha1.ResourceClaim{}).
		WithValidator(&ClaimValidator{Reader: reader, SystemNamespace: opts.SystemNamespace}).
		WithDefaulter(ClaimFinalizer{}).Complete(); err != nil {
		return fmt.Errorf("claim webhooks: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &quotav1alpha1.GrantCreationPolicy{}).
		WithValidator(GrantPolicyValidator{}).Complete(); err != nil {
		return fmt.Errorf("grant creation policy webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &quotav1alpha1.ClaimCreationPolicy{}).
		WithValidator(ClaimPolicyValidator{}).Complete(); err != nil {
		return fmt.Errorf("claim creation policy webhook: %w", err)
	}
	return nil
}
