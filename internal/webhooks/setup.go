// Package webhooks keeps bad quota objects out: validating webhooks for
// registrations, grants, claims, creation policies and quota constraints,
// the guard on
// namespaces' consumer labels, and the mutating webhook that gives every
// claim its finalizer. The webhooks are adapters: the rules live in package
// validation, which the controllers and quotactl apply too. What is the
// webhooks' own is admission itself: which operations are judged, and by
// whom.
package webhooks

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// Options configure the webhooks.
type Options struct {
	// SystemNamespace holds the buckets (and so the grants) of consumers
	// that are neither a namespace nor inside one.
	SystemNamespace string
	// ConsumerLabelGroups may add, change or remove a namespace's consumer
	// labels; default system:masters.
	ConsumerLabelGroups []string
	// ConsumerLabelKeys are namespace labels guarded besides the consumer
	// labels of the registered consumer kinds.
	ConsumerLabelKeys []string
	// BypassGroups may create, change and delete QuotaBypasses; default
	// system:masters.
	BypassGroups []string
	// MaxBypassDuration is the longest spec.duration of a QuotaBypass;
	// default DefaultMaxBypassDuration.
	MaxBypassDuration time.Duration
	// Ledger is the process's one ledger: delegated grants are reserved
	// through it (nil refuses every create or raise of one), and so is
	// what a namespace moved to another consumer brings there.
	Ledger *ledger.Ledger
	// GrantsSynced reports whether the ledger's grant mirror has synced.
	GrantsSynced func() bool
	// NamespaceMoves counts what a moved namespace's objects will count
	// under its new labels (ConsumerLabelGuard); nil: a move holds nothing.
	NamespaceMoves NamespaceMoves
}

// consumerLabelGuardPath is the path of the namespace webhook, as its
// kubebuilder marker says (controller-runtime's own would be
// /validate--v1-namespace).
const consumerLabelGuardPath = "/validate-v1-namespace-consumer-labels"

func consumerLabelGuard(reader client.Reader, opts Options) *ConsumerLabelGuard {
	g := &ConsumerLabelGuard{Reader: reader, Groups: opts.ConsumerLabelGroups, ExtraKeys: opts.ConsumerLabelKeys}
	if opts.NamespaceMoves != nil && opts.Ledger != nil {
		g.Moves, g.Ledger = opts.NamespaceMoves, opts.Ledger
	}
	return g
}

// Setup registers the webhooks on mgr's webhook server. Paths match the
// kubebuilder markers, from which config/webhook is generated.
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.SystemNamespace == "" {
		opts.SystemNamespace = quotav1alpha1.DefaultSystemNamespace
	}
	if opts.ConsumerLabelGroups == nil {
		opts.ConsumerLabelGroups = []string{"system:masters"}
	}
	if opts.BypassGroups == nil {
		opts.BypassGroups = []string{"system:masters"}
	}
	if opts.MaxBypassDuration <= 0 {
		opts.MaxBypassDuration = DefaultMaxBypassDuration
	}
	reader := mgr.GetClient()
	if err := ctrl.NewWebhookManagedBy(mgr, &corev1.Namespace{}).
		WithValidator(consumerLabelGuard(reader, opts)).
		WithValidatorCustomPath(consumerLabelGuardPath).Complete(); err != nil {
		return fmt.Errorf("namespace consumer label webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &quotav1alpha1.ResourceRegistration{}).
		WithValidator(RegistrationValidator{Reader: reader}).Complete(); err != nil {
		return fmt.Errorf("registration webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &quotav1alpha1.ResourceGrant{}).
		WithValidator(&GrantValidator{
			Reader: reader, SystemNamespace: opts.SystemNamespace, Authorizer: mgr.GetClient(),
			HandOut: &HandOut{Ledger: opts.Ledger, Synced: opts.GrantsSynced, Reader: reader},
		}).Complete(); err != nil {
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
	if err := ctrl.NewWebhookManagedBy(mgr, &quotav1alpha1.QuotaBypass{}).
		WithValidator(&BypassGuard{Groups: opts.BypassGroups, MaxDuration: opts.MaxBypassDuration,
			Recorder: mgr.GetEventRecorder("quotakeeper-bypass-webhook"), Constraints: mgr.GetAPIReader()}).Complete(); err != nil {
		return fmt.Errorf("quota bypass webhook: %w", err)
	}
	mgr.GetWebhookServer().Register(quotaConstraintPath, &webhook.Admission{Handler: QuotaConstraintValidator{}})
	mgr.GetWebhookServer().Register(quotaConstraintVersionPath, &webhook.Admission{Handler: QuotaConstraintVersioner{}})
	return nil
}
