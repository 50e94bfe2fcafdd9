package celpolicy

import (
	"context"
	"slices"
	"strings"

	"github.com/google/cel-go/interpreter"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// The parts both kinds of policy share: the trigger, its conditions, the
// created object's metadata and consumer, and the resource types named.

// ResourceTypeField is a resource type a policy's template names literally,
// and where.
type ResourceTypeField struct {
	Path         *field.Path
	ResourceType string
}

// common is what a compiled policy of either kind holds besides its
// template's spec.
type common struct {
	trigger       schema.GroupVersionKind
	conditions    []condition
	meta          metaTemplate
	consumer      consumerTemplate
	resourceTypes []ResourceTypeField
}

// Trigger is the kind whose objects trigger the policy.
func (c *common) Trigger() schema.GroupVersionKind { return c.trigger }

// ResourceTypes are the resource types the template names literally
// (templated ones are known only when rendered), in order, without
// repeats.
func (c *common) ResourceTypes() []string {
	var out []string
	for _, f := range c.resourceTypes {
		if !slices.Contains(out, f.ResourceType) {
			out = append(out, f.ResourceType)
		}
	}
	return out
}

// ResourceTypeFields are the resource types the template names literally,
// with their fields.
func (c *common) ResourceTypeFields() []ResourceTypeField { return c.resourceTypes }

// ConsumerType is the consumer kind the template names, when it names it
// literally.
func (c *common) ConsumerType() (quotav1alpha1.ConsumerTypeRef, bool) {
	if c.consumer.apiGroup.parts != nil || c.consumer.kind.parts != nil {
		return quotav1alpha1.ConsumerTypeRef{}, false
	}
	return quotav1alpha1.ConsumerTypeRef{APIGroup: c.consumer.apiGroup.raw, Kind: c.consumer.kind.raw}, true
}

// compileCommon compiles the trigger, conditions, metadata and consumer.
func (c *compiler) compileCommon(trigger quotav1alpha1.PolicyTrigger, tmpl *field.Path, meta quotav1alpha1.ObjectMetaTemplate,
	consumer quotav1alpha1.ConsumerRefTemplate) common {
	var out common
	tpath := field.NewPath("spec", "trigger")
	gv, err := schema.ParseGroupVersion(trigger.Resource.APIVersion)
	if err != nil {
		c.errs = append(c.errs, field.Invalid(tpath.Child("resource", "apiVersion"), trigger.Resource.APIVersion, err.Error()))
	}
	out.trigger = gv.WithKind(trigger.Resource.Kind)
	for i, k := range trigger.Conditions {
		out.conditions = append(out.conditions, c.condition(tpath.Child("conditions").Index(i).Child("expression"), k.Expression))
	}
	out.meta = c.metaTemplate(tmpl.Child("metadata"), meta)
	out.consumer = c.consumerTemplate(tmpl.Child("spec", "consumerRef"), consumer)
	return out
}

// applies evaluates the conditions in order; the first that does not
// hold decides.
func (c *common) applies(ctx context.Context, vars interpreter.Activation) (bool, error) {
	for _, k := range c.conditions {
		if ok, err := k.holds(ctx, vars); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// resourceType compiles a resource type field, recording it when literal.
func (c *compiler) resourceType(out *common, path *field.Path, rt string) text {
	t := c.text(path, rt, required)
	if t.parts == nil && rt != "" {
		out.resourceTypes = append(out.resourceTypes, ResourceTypeField{Path: path, ResourceType: rt})
	}
	return t
}

// metaTemplate is the created object's metadata.
type metaTemplate struct {
	name, generateName, namespace text
	labels, annotations           []keyedText
}

func (c *compiler) metaTemplate(path *field.Path, m quotav1alpha1.ObjectMetaTemplate) metaTemplate {
	return metaTemplate{
		name:         c.text(path.Child("name"), m.Name, optional(validation.IsDNS1123Subdomain)),
		generateName: c.text(path.Child("generateName"), m.GenerateName, optional(namePrefix)),
		namespace:    c.text(path.Child("namespace"), m.Namespace, optional(validation.IsDNS1123Label)),
		labels:       c.textMap(path.Child("labels"), m.Labels, validation.IsQualifiedName, validation.IsValidLabelValue),
		annotations:  c.textMap(path.Child("annotations"), m.Annotations, annotationKey, nil),
	}
}

func (m metaTemplate) render(ctx context.Context, vars interpreter.Activation) (metav1.ObjectMeta, error) {
	var out metav1.ObjectMeta
	var err error
	for _, f := range []struct {
		t   text
		dst *string
	}{{m.name, &out.Name}, {m.generateName, &out.GenerateName}, {m.namespace, &out.Namespace}} {
		if *f.dst, err = f.t.render(ctx, vars); err != nil {
			return out, err
		}
	}
	if out.Labels, err = renderMap(ctx, vars, m.labels); err != nil {
		return out, err
	}
	out.Annotations, err = renderMap(ctx, vars, m.annotations)
	return out, err
}

// consumerTemplate is the created object's consumerRef.
type consumerTemplate struct {
	apiGroup, kind, name, namespace text
}

func (c *compiler) consumerTemplate(path *field.Path, r quotav1alpha1.ConsumerRefTemplate) consumerTemplate {
	return consumerTemplate{
		apiGroup:  c.text(path.Child("apiGroup"), r.APIGroup, optional(validation.IsDNS1123Subdomain)),
		kind:      c.text(path.Child("kind"), r.Kind, required),
		name:      c.text(path.Child("name"), r.Name, required),
		namespace: c.text(path.Child("namespace"), r.Namespace, optional(validation.IsDNS1123Label)),
	}
}

func (t consumerTemplate) render(ctx context.Context, vars interpreter.Activation) (quotav1alpha1.ConsumerRef, error) {
	var out quotav1alpha1.ConsumerRef
	for _, f := range []struct {
		t   text
		dst *string
	}{{t.apiGroup, &out.APIGroup}, {t.kind, &out.Kind}, {t.name, &out.Name}, {t.namespace, &out.Namespace}} {
		var err error
		if *f.dst, err = f.t.render(ctx, vars); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Checks of rendered (or literal) values.

func required(v string) []string {
	if v == "" {
		return []string{"must not be empty"}
	}
	return nil
}

// optional applies check to non-empty values.
func optional(check checkFunc) checkFunc {
	return func(v string) []string {
		if v == "" {
			return nil
		}
		return check(v)
	}
}

// namePrefix checks a generateName: a name once a suffix is added.
func namePrefix(v string) []string { return apivalidation.NameIsDNSSubdomain(v, true) }

// annotationKey checks an annotation key as the API server does.
func annotationKey(k string) []string { return validation.IsQualifiedName(strings.ToLower(k)) }
