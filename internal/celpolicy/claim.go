package celpolicy

import (
	"context"

	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// ClaimPolicy is a compiled ClaimCreationPolicy.
type ClaimPolicy struct {
	common
	requests []requestTemplate
}

type requestTemplate struct {
	resourceType text
	amount       amount
	dimensions   []keyedText
}

// ClaimInput is what a ClaimCreationPolicy is rendered against: the
// variables trigger (the object), user (authentication/v1 UserInfo as a
// map: username, uid, groups, extra) and requestInfo (operation,
// resource{group,version,resource}, subResource, namespace, name, dryRun),
// what Gatekeeper's input.review carries.
type ClaimInput struct {
	Trigger, User, RequestInfo map[string]any
}

// ClaimResult is a ClaimCreationPolicy rendered for one trigger.
type ClaimResult struct {
	// Applies is false when a condition does not hold: no claim.
	Applies bool
	// Claim is the rendered metadata and spec; the caller sets
	// spec.resourceRef to the trigger.
	Claim *quotav1alpha1.ResourceClaim
}

// CompileClaimPolicy compiles every condition and template of the policy.
// Errors carry field paths, as CompileGrantPolicy's do.
func CompileClaimPolicy(p *quotav1alpha1.ClaimCreationPolicy) (*ClaimPolicy, field.ErrorList) {
	c := &compiler{env: claimEnv}
	tmpl := field.NewPath("spec", "target", "resourceClaimTemplate")
	t := p.Spec.Target.ResourceClaimTemplate
	cp := &ClaimPolicy{common: c.compileCommon(p.Spec.Trigger, tmpl, t.Metadata, t.Spec.ConsumerRef)}
	for i, r := range t.Spec.Requests {
		path := tmpl.Child("spec", "requests").Index(i)
		cp.requests = append(cp.requests, requestTemplate{
			resourceType: c.resourceType(&cp.common, path.Child("resourceType"), r.ResourceType),
			amount:       c.amount(path.Child("amount"), r.Amount, 1),
			dimensions:   c.textMap(path.Child("dimensions"), r.Dimensions, validation.IsQualifiedName, validation.IsValidLabelValue),
		})
	}
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return cp, nil
}

// Render evaluates the conditions against the input; Applies is false when
// one does not hold. Otherwise Claim is the rendered ResourceClaim. Any
// evaluation error is returned, as a *field.Error naming the field.
func (c *ClaimPolicy) Render(ctx context.Context, in ClaimInput) (ClaimResult, error) {
	vars, err := interpreter.NewActivation(map[string]any{varTrigger: in.Trigger, varUser: in.User, varRequestInfo: in.RequestInfo})
	if err != nil {
		return ClaimResult{}, err
	}
	if ok, err := c.applies(ctx, vars); err != nil || !ok {
		return ClaimResult{}, err
	}
	claim := &quotav1alpha1.ResourceClaim{}
	if claim.ObjectMeta, err = c.meta.render(ctx, vars); err != nil {
		return ClaimResult{}, err
	}
	if claim.Spec.ConsumerRef, err = c.consumer.render(ctx, vars); err != nil {
		return ClaimResult{}, err
	}
	for _, rt := range c.requests {
		r := quotav1alpha1.ResourceRequest{}
		if r.ResourceType, err = rt.resourceType.render(ctx, vars); err != nil {
			return ClaimResult{}, err
		}
		if r.Amount, err = rt.amount.render(ctx, vars); err != nil {
			return ClaimResult{}, err
		}
		if r.Dimensions, err = renderMap(ctx, vars, rt.dimensions); err != nil {
			return ClaimResult{}, err
		}
		claim.Spec.Requests = append(claim.Spec.Requests, r)
	}
	return ClaimResult{Applies: true, Claim: claim}, nil
}
