package webhooks

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-v1-namespace-consumer-labels,mutating=false,failurePolicy=fail,sideEffects=None,groups="",resources=namespaces;namespaces/status;namespaces/finalize,verbs=create;update,versions=v1,name=vnamespace-consumer-labels.quota.miloapis.com,timeoutSeconds=5,admissionReviewVersions=v1

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
type ConsumerLabelGuard struct {
	Reader    client.Reader
	Groups    []string
	ExtraKeys []string
}

var _ admission.Validator[*corev1.Namespace] = (*ConsumerLabelGuard)(nil)

func (g *ConsumerLabelGuard) ValidateCreate(ctx context.Context, ns *corev1.Namespace) (admission.Warnings, error) {
	return nil, g.judge(ctx, ns, nil, ns.Labels)
}

func (g *ConsumerLabelGuard) ValidateUpdate(ctx context.Context, old, ns *corev1.Namespace) (admission.Warnings, error) {
	return nil, g.judge(ctx, ns, old.Labels, ns.Labels)
}

func (g *ConsumerLabelGuard) ValidateDelete(context.Context, *corev1.Namespace) (admission.Warnings, error) {
	return nil, nil
}

func (g *ConsumerLabelGuard) judge(ctx context.Context, ns *corev1.Namespace, old, labels map[string]string) error {
	changed := changedKeys(old, labels)
	if len(changed) == 0 {
		return nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return err
	}
	if sets.New(req.UserInfo.Groups...).HasAny(g.Groups...) {
		return nil
	}
	guarded, err := g.guardedKeys(ctx)
	if err != nil {
		return fmt.Errorf("reading the consumer labels: %w", err)
	}
	who := "no one may add, change or remove it (the manager's --consumer-label-groups is empty)"
	if len(g.Groups) > 0 {
		who = fmt.Sprintf("only members of %s may add, change or remove it, and %q is not", strings.Join(g.Groups, ", "), req.UserInfo.Username)
	}
	var errs field.ErrorList
	for _, key := range changed {
		if guarded.Has(key) {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "labels").Key(key),
				"names the consumer that pays for this namespace's quota; "+who))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewForbidden(corev1.Resource("namespaces"), ns.Name, errs.ToAggregate())
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
