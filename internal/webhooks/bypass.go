package webhooks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/bypass"
	"github.com/quotakeeper/quotakeeper/internal/eventnote"
	"github.com/quotakeeper/quotakeeper/rego"
)

// +kubebuilder:webhook:path=/validate-quota-miloapis-com-v1alpha1-quotabypass,mutating=false,failurePolicy=fail,sideEffects=None,groups=quota.miloapis.com,resources=quotabypasses,verbs=create;update;delete,versions=v1alpha1,name=vquotabypass.quota.miloapis.com,timeoutSeconds=5,admissionReviewVersions=v1

// DefaultMaxBypassDuration is the longest a QuotaBypass may last unless the
// manager's --max-bypass-duration says otherwise.
const DefaultMaxBypassDuration = time.Hour

// BypassGuard admits a QuotaBypass (the break-glass procedure) only from
// members of Groups, and only with a reason, a duration in (0, MaxDuration]
// and at least one constraint; its spec never changes after creation. RBAC
// (the quotakeeper-break-glass ClusterRole) says who may write the kind at
// all; the guard is the second key, and it is where each request is
// recorded: a log line and a BypassRequested Event with the user and the
// reason. The webhook fails closed (failurePolicy Fail).
//
// One update passes without the group: adding or removing the bypass's
// finalizer, with nothing else changed (the manager does it; its service
// account is in no bypass group). Removing it is refused, from anyone,
// while a constraint still carries the bypass's annotation: the finalizer
// is what makes the manager restore them, and a bypass gone before that
// would leave them at warn for good.
type BypassGuard struct {
	Groups      []string
	MaxDuration time.Duration
	Recorder    events.EventRecorder
	// Constraints reads Gatekeeper's constraints, uncached.
	Constraints client.Reader
}

var _ admission.Validator[*quotav1alpha1.QuotaBypass] = (*BypassGuard)(nil)

func (g *BypassGuard) ValidateCreate(ctx context.Context, b *quotav1alpha1.QuotaBypass) (admission.Warnings, error) {
	user, err := g.authorize(ctx, b, "create")
	if err != nil {
		return nil, err
	}
	errs := ValidateBypassSpec(&b.Spec, g.MaxDuration)
	quotaErrs, err := g.onlyQuotaConstraints(ctx, &b.Spec)
	if err != nil {
		return nil, err
	}
	if errs = append(errs, quotaErrs...); len(errs) > 0 {
		return nil, apierrors.NewInvalid(quotav1alpha1.GroupVersion.WithKind("QuotaBypass").GroupKind(), b.Name, errs)
	}
	g.record(ctx, b, user, "Create")
	return nil, nil
}

func (g *BypassGuard) ValidateUpdate(ctx context.Context, old, b *quotav1alpha1.QuotaBypass) (admission.Warnings, error) {
	if finalizerOnly(old, b) {
		return nil, g.mayRemoveFinalizer(ctx, old, b)
	}
	user, err := g.authorize(ctx, b, "update")
	if err != nil {
		return nil, err
	}
	if !apiequality.Semantic.DeepEqual(old.Spec, b.Spec) {
		return nil, apierrors.NewInvalid(quotav1alpha1.GroupVersion.WithKind("QuotaBypass").GroupKind(), b.Name, field.ErrorList{
			field.Forbidden(field.NewPath("spec"), "is immutable: delete the QuotaBypass and create another"),
		})
	}
	g.record(ctx, b, user, "Update")
	return nil, nil
}

func (g *BypassGuard) ValidateDelete(ctx context.Context, b *quotav1alpha1.QuotaBypass) (admission.Warnings, error) {
	user, err := g.authorize(ctx, b, "delete")
	if err != nil {
		return nil, err
	}
	g.record(ctx, b, user, "Delete")
	return nil, nil
}

// onlyQuotaConstraints refuses a constraint kind whose ConstraintTemplate
// does not build on quotakeeper's Rego library: break-glass is for quota,
// and a QuotaBypass must not become a way for a bypass group to switch off
// any other policy (a required label, an image allow-list).
func (g *BypassGuard) onlyQuotaConstraints(ctx context.Context, s *quotav1alpha1.QuotaBypassSpec) (field.ErrorList, error) {
	var errs field.ErrorList
	for i, c := range s.Constraints {
		if c.Kind == "" {
			continue // ValidateBypassSpec says so
		}
		p := field.NewPath("spec", "constraints").Index(i).Child("kind")
		t := &unstructured.Unstructured{}
		t.SetGroupVersionKind(schema.GroupVersionKind{Group: "templates.gatekeeper.sh", Version: "v1", Kind: "ConstraintTemplate"})
		err := g.Constraints.Get(ctx, client.ObjectKey{Name: strings.ToLower(c.Kind)}, t)
		switch {
		case apierrors.IsNotFound(err):
			errs = append(errs, field.Invalid(p, c.Kind, fmt.Sprintf("no ConstraintTemplate %q makes this kind", strings.ToLower(c.Kind))))
		case err != nil:
			return nil, fmt.Errorf("reading ConstraintTemplate %s: %w", strings.ToLower(c.Kind), err)
		case !rego.IsQuotaTemplate(t):
			errs = append(errs, field.Invalid(p, c.Kind, "not a quota constraint: a QuotaBypass relaxes only constraints whose template builds on quotakeeper's Rego library (lib.quota)"))
		}
	}
	return errs, nil
}

// mayRemoveFinalizer refuses to remove the finalizer while the bypass still
// holds constraints relaxed.
func (g *BypassGuard) mayRemoveFinalizer(ctx context.Context, old, b *quotav1alpha1.QuotaBypass) error {
	if !controllerutil.ContainsFinalizer(old, quotav1alpha1.BypassFinalizer) || controllerutil.ContainsFinalizer(b, quotav1alpha1.BypassFinalizer) {
		return nil
	}
	holding, err := bypass.Holding(ctx, g.Constraints, b)
	if err != nil {
		return fmt.Errorf("reading the constraints the bypass relaxed: %w", err)
	}
	if len(holding) == 0 {
		return nil
	}
	return apierrors.NewForbidden(quotav1alpha1.GroupVersion.WithResource("quotabypasses").GroupResource(), b.Name,
		fmt.Errorf("finalizer %s: it still holds %s at warn; the manager removes it once it has restored them",
			quotav1alpha1.BypassFinalizer, strings.Join(holding, ", ")))
}

// authorize returns the requesting user's name when they are in a bypass
// group, else a Forbidden error that says who may.
func (g *BypassGuard) authorize(ctx context.Context, b *quotav1alpha1.QuotaBypass, verb string) (string, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return "", err
	}
	if sets.New(req.UserInfo.Groups...).HasAny(g.Groups...) {
		return req.UserInfo.Username, nil
	}
	who := "no one may (the manager's --bypass-groups is empty)"
	if len(g.Groups) > 0 {
		who = fmt.Sprintf("only members of %s may, and %q is not", strings.Join(g.Groups, ", "), req.UserInfo.Username)
	}
	return "", apierrors.NewForbidden(quotav1alpha1.GroupVersion.WithResource("quotabypasses").GroupResource(), b.Name,
		fmt.Errorf("a QuotaBypass turns quota denials into warnings; to %s one %s", verb, who))
}

// record logs the request and records it as a BypassRequested Event on the
// bypass, its action the operation (Create, Update, Delete): the Event
// recorder folds Events that differ only in their note into one series, so
// the operations must differ elsewhere.
func (g *BypassGuard) record(ctx context.Context, b *quotav1alpha1.QuotaBypass, user, operation string) {
	log.FromContext(ctx).WithName("bypass").Info("QuotaBypass requested", "operation", operation, "bypass", b.Name, "user", user,
		"reason", b.Spec.Reason, "duration", b.Spec.Duration.Duration.String(), "constraints", b.Spec.Constraints)
	if g.Recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: quotav1alpha1.GroupVersion.String(), Kind: "QuotaBypass", Name: b.Name, UID: b.UID}
	g.Recorder.Eventf(ref, nil, corev1.EventTypeWarning, "BypassRequested", operation,
		"%s by %s for %s: %s", operation, user, b.Spec.Duration.Duration, eventnote.FitIn(b.Spec.Reason, 900))
}

// ValidateBypassSpec checks a QuotaBypass spec: a reason, a duration above
// zero and at most maxDuration, and constraints each with a kind and name.
func ValidateBypassSpec(s *quotav1alpha1.QuotaBypassSpec, maxDuration time.Duration) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if strings.TrimSpace(s.Reason) == "" {
		errs = append(errs, field.Required(spec.Child("reason"), "say why quota is bypassed (an incident, a ticket)"))
	}
	switch d := s.Duration.Duration; {
	case d <= 0:
		errs = append(errs, field.Invalid(spec.Child("duration"), d.String(), "must be more than 0"))
	case d > maxDuration:
		errs = append(errs, field.Invalid(spec.Child("duration"), d.String(),
			fmt.Sprintf("must be at most %s (the manager's --max-bypass-duration)", maxDuration)))
	}
	if len(s.Constraints) == 0 {
		errs = append(errs, field.Required(spec.Child("constraints"), "name at least one constraint to relax"))
	}
	for i, c := range s.Constraints {
		p := spec.Child("constraints").Index(i)
		if c.Kind == "" {
			errs = append(errs, field.Required(p.Child("kind"), "the constraint's kind"))
		}
		if c.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), `the constraint's name, or "*"`))
		}
	}
	return errs
}

// finalizerOnly reports whether an update changes nothing but the bypass's
// finalizer.
func finalizerOnly(old, b *quotav1alpha1.QuotaBypass) bool {
	if !apiequality.Semantic.DeepEqual(old.Spec, b.Spec) {
		return false
	}
	strip := func(fs []string) []string {
		return slices.DeleteFunc(slices.Clone(fs), func(f string) bool { return f == quotav1alpha1.BypassFinalizer })
	}
	o, n := old.ObjectMeta.DeepCopy(), b.ObjectMeta.DeepCopy()
	o.Finalizers, n.Finalizers = strip(o.Finalizers), strip(n.Finalizers)
	o.ResourceVersion, n.ResourceVersion = "", ""
	o.ManagedFields, n.ManagedFields = nil, nil
	o.Generation, n.Generation = 0, 0
	return apiequality.Semantic.DeepEqual(o, n)
}
