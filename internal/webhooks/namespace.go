package webhooks

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// +kubebuilder:webhook:path=/validate-v1-namespace-consumer-labels,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups="",resources=namespaces;namespaces/status;namespaces/finalize,verbs=create;update,versions=v1,name=vnamespace-consumer-labels.quota.miloapis.com,timeoutSeconds=5,admissionReviewVersions=v1

// ConsumerLabelGuard decides who may say which consumer pays for a
// namespace. A namespace's consumer label (resourcemanager.miloapis.com/
// organization=acme) charges everything in it to that consumer and lets
// claims in it draw on the consumer's quota, so whoever may set it may spend
// another tenant's quota. RBAC cannot tell a label from the rest of a
// namespace: a tenant allowed to label its namespace at all could relabel it.
// So only members of Groups may add, change or remove one; other label
// changes pass.
//
// The guarded keys are the consumer labels of every kind a
// ResourceRegistration names as its consumer, plus ExtraKeys (for
// constraints that read a consumer from a labelKey of their own). Failures
// to read the registrations fail closed, as does the webhook itself
// (failurePolicy Fail).
//
// A move that is allowed holds, in the buckets of the namespace's new
// consumers, what its objects will count there (Moves, Ledger): until the
// observer has counted them under the new labels, admission would decide
// against buckets that lack them (a namespace holding 1 moved into an
// Organization with a limit of 1, and a create right after: 2 of 1). The
// move is all or nothing: one its objects would take past a limit is
// denied with the ledger's numbers, and the platform team raises the grant
// first.
type ConsumerLabelGuard struct {
	Reader    client.Reader
	Groups    []string
	ExtraKeys []string
	// Moves counts what a namespace's objects will count under its new
	// labels; nil: a move holds nothing.
	Moves NamespaceMoves
	// Ledger holds it (ledger.NamespaceMoveID).
	Ledger interface {
		Reserve(ctx context.Context, claim ledger.Claim) (ledger.Decision, error)
	}
}

// NamespaceMoves counts, per bucket, what the objects of a namespace will
// count with ns's labels beyond what they count with old's
// (observer.MoveCounter).
type NamespaceMoves interface {
	Cost(ctx context.Context, old, ns *corev1.Namespace) (map[ledger.BucketKey]int64, error)
}

var _ admission.Validator[*corev1.Namespace] = (*ConsumerLabelGuard)(nil)

func (g *ConsumerLabelGuard) ValidateCreate(ctx context.Context, ns *corev1.Namespace) (admission.Warnings, error) {
	_, err := g.judge(ctx, ns, nil, ns.Labels)
	return nil, err
}

func (g *ConsumerLabelGuard) ValidateUpdate(ctx context.Context, old, ns *corev1.Namespace) (admission.Warnings, error) {
	moved, err := g.judge(ctx, ns, old.Labels, ns.Labels)
	if err != nil || len(moved) == 0 {
		return nil, err
	}
	return nil, g.holdMove(ctx, old, ns, moved)
}

func (g *ConsumerLabelGuard) ValidateDelete(context.Context, *corev1.Namespace) (admission.Warnings, error) {
	return nil, nil
}

// judge allows or forbids the change of labels and returns the consumer
// labels it changes.
func (g *ConsumerLabelGuard) judge(ctx context.Context, ns *corev1.Namespace, old, labels map[string]string) ([]string, error) {
	changed := changedKeys(old, labels)
	if len(changed) == 0 {
		return nil, nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, err
	}
	guarded, err := g.guardedKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the consumer labels: %w", err)
	}
	var moved []string
	for _, key := range changed {
		if guarded.Has(key) {
			moved = append(moved, key)
		}
	}
	if len(moved) == 0 || sets.New(req.UserInfo.Groups...).HasAny(g.Groups...) {
		return moved, nil
	}
	who := "no one may add, change or remove it (the manager's --consumer-label-groups is empty)"
	if len(g.Groups) > 0 {
		who = fmt.Sprintf("only members of %s may add, change or remove it, and %q is not", strings.Join(g.Groups, ", "), req.UserInfo.Username)
	}
	var errs field.ErrorList
	for _, key := range moved {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "labels").Key(key),
			"names the consumer that pays for this namespace's quota; "+who))
	}
	return nil, apierrors.NewForbidden(corev1.Resource("namespaces"), ns.Name, errs.ToAggregate())
}

// holdMove reserves what the namespace's objects will count under its new
// labels (the keys in moved changed), all or nothing. A dry run holds
// nothing.
func (g *ConsumerLabelGuard) holdMove(ctx context.Context, old, ns *corev1.Namespace, moved []string) error {
	if g.Moves == nil {
		return nil
	}
	if req, err := admission.RequestFromContext(ctx); err != nil || (req.DryRun != nil && *req.DryRun) {
		return err
	}
	cost, err := g.Moves.Cost(ctx, old, ns)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("counting what the objects of namespace %s count under its new labels: %w", ns.Name, err))
	}
	if len(cost) == 0 {
		return nil
	}
	claim := ledger.Claim{
		ID:     ledger.NamespaceMoveID(string(ns.UID), ns.Labels),
		Object: ledger.ObjectRef{Kind: "Namespace", Name: ns.Name, UID: string(ns.UID)},
	}
	for _, key := range slices.SortedFunc(maps.Keys(cost), func(a, b ledger.BucketKey) int { return strings.Compare(a.String(), b.String()) }) {
		claim.Requests = append(claim.Requests, ledger.Request{
			Consumer: key.Consumer, ResourceType: key.ResourceType, Amount: cost[key], Dimensions: key.DimensionSet(),
		})
	}
	d, err := g.Ledger.Reserve(ctx, claim)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("holding what the objects of namespace %s count under its new labels: %w", ns.Name, err))
	}
	if d.Granted {
		return nil
	}
	return apierrors.NewForbidden(corev1.Resource("namespaces"), ns.Name, field.ErrorList{
		field.Forbidden(field.NewPath("metadata", "labels").Key(moved[0]),
			"the objects in this namespace would take its new consumer past its quota: "+d.Message()),
	}.ToAggregate())
}

// guardedKeys are the consumer labels of the registered consumer kinds and
// the extra keys.
func (g *ConsumerLabelGuard) guardedKeys(ctx context.Context) (sets.Set[string], error) {
	var regs quotav1alpha1.ResourceRegistrationList
	if err := g.Reader.List(ctx, &regs); err != nil {
		return nil, err
	}
	keys := sets.New(g.ExtraKeys...)
	for _, r := range regs.Items {
		c := r.Spec.ConsumerTypeRef
		keys.Insert(quotav1alpha1.ConsumerLabelKey(c.APIGroup, c.Kind))
	}
	return keys, nil
}

// CheckConsumerLabelKeys refuses extra consumer label keys the guard would
// never see: its webhook is called only for labels outside Kubernetes'
// reserved domains (quotav1alpha1.KubernetesReservedLabel).
func CheckConsumerLabelKeys(keys []string) error {
	for _, k := range keys {
		if quotav1alpha1.KubernetesReservedLabel(k) {
			return fmt.Errorf("%s lies in a domain Kubernetes reserves (kubernetes.io, k8s.io): the namespace guard is not called for it, so it cannot be guarded", k)
		}
	}
	return nil
}

// changedKeys are the label keys added, removed or given another value, in
// order.
func changedKeys(old, labels map[string]string) []string {
	var out []string
	for k, v := range labels {
		if was, ok := old[k]; !ok || was != v {
			out = append(out, k)
		}
	}
	for k := range old {
		if _, ok := labels[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
