package controllers

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/celpolicy"
	"github.com/quotakeeper/quotakeeper/internal/validation"
)

// +kubebuilder:rbac:groups=quota.miloapis.com,resources=grantcreationpolicies;claimcreationpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=quota.miloapis.com,resources=grantcreationpolicies/status;claimcreationpolicies/status,verbs=get;update;patch

// unservedRecheck is how soon a policy whose trigger or parent kind the
// API server does not serve is judged again: discovery has no watch, and a
// CRD installed after the policy should make it Ready without an edit.
const unservedRecheck = 30 * time.Second

// policyReconciler sets a creation policy's Ready condition: PolicyReady
// when it compiles, the API server serves its kinds and every resource
// type it names is registered; False with ValidationFailed and what is
// wrong otherwise, or with PolicyDisabled. The GrantCreationPolicy
// controller and the ClaimCreationPolicy admission path act only on Ready
// policies. One reconciler per kind; kind adapts it.
type policyReconciler struct {
	client client.Client
	mapper meta.RESTMapper
	kind   policyKind
}

// policyKind adapts the policy reconciler to one kind of creation policy.
type policyKind struct {
	name      string
	newObject func() client.Object
	newList   func() client.ObjectList
	// read compiles the policy.
	read func(client.Object) policyFacts
}

// policyFacts is what the reconciler judges a policy by.
type policyFacts struct {
	disabled bool
	status   *quotav1alpha1.PolicyStatus
	// compiled is nil when errs says why it does not compile.
	compiled compiledPolicy
	errs     field.ErrorList
	// parent is spec.target.parentContext's kind, when there is one.
	parent       *schema.GroupKind
	consumerPath *field.Path
}

// compiledPolicy is what both celpolicy kinds tell about themselves.
type compiledPolicy interface {
	Trigger() schema.GroupVersionKind
	ResourceTypeFields() []celpolicy.ResourceTypeField
	ConsumerType() (quotav1alpha1.ConsumerTypeRef, bool)
}

var grantPolicyKind = policyKind{
	name:      "grantcreationpolicy",
	newObject: func() client.Object { return &quotav1alpha1.GrantCreationPolicy{} },
	newList:   func() client.ObjectList { return &quotav1alpha1.GrantCreationPolicyList{} },
	read: func(obj client.Object) policyFacts {
		p := obj.(*quotav1alpha1.GrantCreationPolicy)
		f := policyFacts{disabled: p.Spec.Disabled, status: &p.Status,
			consumerPath: field.NewPath("spec", "target", "resourceGrantTemplate", "spec", "consumerRef")}
		g, errs := celpolicy.CompileGrantPolicy(p)
		if len(errs) > 0 {
			f.errs = errs
			return f
		}
		f.compiled = g
		if gk, ok := g.Parent(); ok {
			f.parent = &gk
		}
		return f
	},
}

var claimPolicyKind = policyKind{
	name:      "claimcreationpolicy",
	newObject: func() client.Object { return &quotav1alpha1.ClaimCreationPolicy{} },
	newList:   func() client.ObjectList { return &quotav1alpha1.ClaimCreationPolicyList{} },
	read: func(obj client.Object) policyFacts {
		p := obj.(*quotav1alpha1.ClaimCreationPolicy)
		f := policyFacts{disabled: p.Spec.Disabled, status: &p.Status,
			consumerPath: field.NewPath("spec", "target", "resourceClaimTemplate", "spec", "consumerRef")}
		c, errs := celpolicy.CompileClaimPolicy(p)
		if len(errs) > 0 {
			f.errs = errs
			return f
		}
		f.compiled = c
		return f
	},
}

func (r *policyReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.kind.name).
		For(r.kind.newObject()).
		// A registration appearing, going active or away re-judges the
		// policies that name its resource type.
		Watches(&quotav1alpha1.ResourceRegistration{}, handler.EnqueueRequestsFromMapFunc(r.policiesOfRegistration)).
		Complete(r)
}

func (r *policyReconciler) policiesOfRegistration(ctx context.Context, obj client.Object) []reconcile.Request {
	reg := obj.(*quotav1alpha1.ResourceRegistration)
	list := r.kind.newList()
	if err := r.client.List(ctx, list, client.MatchingFields{indexPolicyResourceType: reg.Spec.ResourceType}); err != nil {
		log.FromContext(ctx).Error(err, "list policies of registration", "registration", reg.Name)
		return nil
	}
	var out []reconcile.Request
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o.(client.Object))})
		return nil
	})
	return out
}

func (r *policyReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.kind.newObject()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if obj.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil
	}
	facts := r.kind.read(obj)
	problems, result, wait, err := r.judge(ctx, facts)
	if err != nil || wait {
		return result, err
	}
	cond := readyCondition(obj.GetGeneration(), facts.disabled, problems)
	if facts.status.ObservedGeneration == obj.GetGeneration() && !conditionDiffers(facts.status.Conditions, cond) {
		return result, nil
	}
	facts.status.ObservedGeneration = obj.GetGeneration()
	meta.SetStatusCondition(&facts.status.Conditions, cond)
	return result, ignoreConflict(r.client.Status().Update(ctx, obj))
}

// judge finds what is wrong with an enabled policy that compiles: kinds the
// API server does not serve (judged again after unservedRecheck) and
// resource types not registered. wait is true when all that is missing is
// a registration's verdict: its status update brings the policy back.
func (r *policyReconciler) judge(ctx context.Context, f policyFacts) (problems field.ErrorList, result reconcile.Result, wait bool, err error) {
	if f.disabled || f.compiled == nil {
		return f.errs, result, false, nil
	}
	problems, unserved, err := r.servedKinds(f)
	if err != nil {
		return nil, result, false, err
	}
	if unserved {
		result.RequeueAfter = unservedRecheck
	}
	cat, err := validation.LoadCatalog(ctx, r.client)
	if err != nil {
		return nil, result, false, err
	}
	registered, pending := registrationProblems(cat, f)
	problems = append(problems, registered...)
	return problems, result, pending && len(problems) == 0, nil
}

// readyCondition is a policy's Ready condition: disabled, else invalid
// with every problem found, else ready.
func readyCondition(generation int64, disabled bool, problems field.ErrorList) metav1.Condition {
	cond := metav1.Condition{Type: quotav1alpha1.ConditionReady, ObservedGeneration: generation, Status: metav1.ConditionFalse}
	switch {
	case disabled:
		cond.Reason, cond.Message = quotav1alpha1.ReasonPolicyDisabled, "spec.disabled is true"
	case len(problems) > 0:
		cond.Reason, cond.Message = quotav1alpha1.ReasonValidationFailed, problems.ToAggregate().Error()
	default:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, "the policy is valid and in use"
	}
	return cond
}

// servedKinds checks that the API server serves the trigger kind, and the
// parent kind as a cluster-scoped kind. unserved reports a kind it does not
// serve (yet); err a discovery failure, to retry.
func (r *policyReconciler) servedKinds(f policyFacts) (problems field.ErrorList, unserved bool, err error) {
	gvk := f.compiled.Trigger()
	if _, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		if !meta.IsNoMatchError(err) {
			return nil, false, err
		}
		unserved = true
		problems = append(problems, field.Invalid(field.NewPath("spec", "trigger", "resource"), gvk.String(), "the API server does not serve this kind"))
	}
	if f.parent != nil {
		path := field.NewPath("spec", "target", "parentContext")
		mapping, err := r.mapper.RESTMapping(*f.parent)
		switch {
		case meta.IsNoMatchError(err):
			unserved = true
			problems = append(problems, field.Invalid(path, f.parent.String(), "the API server does not serve this kind"))
		case err != nil:
			return nil, false, err
		case mapping.Scope.Name() != meta.RESTScopeNameRoot:
			problems = append(problems, field.Invalid(path, f.parent.String(),
				"the kind is namespaced; a parent is a cluster-scoped kind, whose objects can own grants in any namespace"))
		}
	}
	return problems, unserved, nil
}

// registrationProblems judges the resource types the policy names
// literally against the registrations; pending reports one whose
// registration is not judged yet.
func registrationProblems(cat *validation.Catalog, f policyFacts) (field.ErrorList, bool) {
	var consumer *quotav1alpha1.ConsumerTypeRef
	if c, ok := f.compiled.ConsumerType(); ok {
		consumer = &c
	}
	var problems field.ErrorList
	pending := false
	for _, rt := range f.compiled.ResourceTypeFields() {
		v := validation.ValidatePolicyResourceType(cat, rt.ResourceType, rt.Path, consumer, f.consumerPath)
		problems = append(problems, v.Errors...)
		pending = pending || len(v.Pending) > 0
	}
	return problems, pending
}
