package celpolicy

import (
	"context"

	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// GrantPolicy is a compiled GrantCreationPolicy.
type GrantPolicy struct {
	common
	parent     *parent
	allowances []allowanceTemplate
}

type parent struct {
	kind schema.GroupKind
	path *field.Path
	name stringExpr
	src  string
}

type allowanceTemplate struct {
	resourceType text
	buckets      []bucketTemplate
}

type bucketTemplate struct {
	amount amount
	bucket quotav1alpha1.GrantBucket
}

// GrantResult is a GrantCreationPolicy rendered for one trigger.
type GrantResult struct {
	// Applies is false when a condition does not hold: no grant.
	Applies bool
	// Grant is the rendered grant: metadata (name, generateName, namespace,
	// labels, annotations as the template says; namespace empty when the
	// template leaves it to the consumer's buckets) and spec.
	Grant *quotav1alpha1.ResourceGrant
	// ParentName is the name spec.target.parentContext.nameExpression
	// rendered, when the policy has a parent context.
	ParentName string
}

// CompileGrantPolicy compiles every condition and template of the policy.
// Errors carry field paths (spec.trigger.conditions[1].expression: ...),
// for the webhook and the status.
func CompileGrantPolicy(p *quotav1alpha1.GrantCreationPolicy) (*GrantPolicy, field.ErrorList) {
	c := &compiler{env: grantEnv}
	target := p.Spec.Target
	tmpl := field.NewPath("spec", "target", "resourceGrantTemplate")
	g := &GrantPolicy{common: c.compileCommon(p.Spec.Trigger, tmpl, target.ResourceGrantTemplate.Metadata, target.ResourceGrantTemplate.Spec.ConsumerRef)}
	if pc := target.ParentContext; pc != nil {
		path := field.NewPath("spec", "target", "parentContext", "nameExpression")
		name, msg := c.stringExpr(pc.NameExpression, pc.NameExpression)
		if msg != "" {
			c.errs = append(c.errs, field.Invalid(path, pc.NameExpression, msg))
		}
		g.parent = &parent{kind: schema.GroupKind{Group: pc.APIGroup, Kind: pc.Kind}, path: path, name: name, src: pc.NameExpression}
	}
	for i, a := range target.ResourceGrantTemplate.Spec.Allowances {
		path := tmpl.Child("spec", "allowances").Index(i)
		at := allowanceTemplate{resourceType: c.resourceType(&g.common, path.Child("resourceType"), a.ResourceType)}
		for j, b := range a.Buckets {
			at.buckets = append(at.buckets, bucketTemplate{
				amount: c.amount(path.Child("buckets").Index(j).Child("amount"), b.Amount, 0),
				bucket: quotav1alpha1.GrantBucket{DimensionSelector: b.DimensionSelector.DeepCopy()},
			})
		}
		g.allowances = append(g.allowances, at)
	}
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return g, nil
}

// Parent is the kind of spec.target.parentContext, if the policy has one.
func (g *GrantPolicy) Parent() (schema.GroupKind, bool) {
	if g.parent == nil {
		return schema.GroupKind{}, false
	}
	return g.parent.kind, true
}

// Render evaluates the conditions against the trigger (the object as
// unstructured content, the variables trigger and object); Applies is false
// when one does not hold. Otherwise Grant is the rendered ResourceGrant,
// with amounts resolved. Any evaluation error is returned, as a
// *field.Error naming the field.
func (g *GrantPolicy) Render(ctx context.Context, trigger map[string]any) (GrantResult, error) {
	vars, err := interpreter.NewActivation(map[string]any{varTrigger: trigger, varObject: trigger})
	if err != nil {
		return GrantResult{}, err
	}
	if ok, err := g.applies(ctx, vars); err != nil || !ok {
		return GrantResult{}, err
	}
	grant := &quotav1alpha1.ResourceGrant{}
	if grant.ObjectMeta, err = g.meta.render(ctx, vars); err != nil {
		return GrantResult{}, err
	}
	if grant.Spec.ConsumerRef, err = g.consumer.render(ctx, vars); err != nil {
		return GrantResult{}, err
	}
	for _, at := range g.allowances {
		a := quotav1alpha1.Allowance{}
		if a.ResourceType, err = at.resourceType.render(ctx, vars); err != nil {
			return GrantResult{}, err
		}
		for _, bt := range at.buckets {
			b := *bt.bucket.DeepCopy()
			if b.Amount, err = bt.amount.render(ctx, vars); err != nil {
				return GrantResult{}, err
			}
			a.Buckets = append(a.Buckets, b)
		}
		grant.Spec.Allowances = append(grant.Spec.Allowances, a)
	}
	res := GrantResult{Applies: true, Grant: grant}
	if g.parent != nil {
		name, msg := g.parent.name.eval(ctx, vars)
		if msg == "" && name == "" {
			msg = "evaluated to an empty name"
		}
		if msg != "" {
			return GrantResult{}, field.Invalid(g.parent.path, g.parent.src, msg)
		}
		res.ParentName = name
	}
	return res, nil
}
