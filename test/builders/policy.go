package builders

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// policy holds the setters the two creation policies (ClaimCreationPolicy,
// GrantCreationPolicy) share, over the parts their types share: the trigger,
// the metadata template of the object the policy creates (spec.target's),
// spec.disabled, the generation and the Ready status. W is the wrapper that
// embeds it; every setter returns it, so a chain goes on with the kind's own
// methods. The pointers point into the wrapper's object: wrappers are made by
// their constructors and used through the pointer those return, never copied.
type policy[W any] struct {
	self     W
	meta     *metav1.ObjectMeta
	trigger  *quotav1alpha1.PolicyTrigger
	target   *quotav1alpha1.ObjectMetaTemplate
	disabled *bool
	status   *quotav1alpha1.PolicyStatus
}

// Condition adds a trigger condition.
func (p policy[W]) Condition(expression string) W {
	p.trigger.Conditions = append(p.trigger.Conditions, quotav1alpha1.TriggerCondition{Expression: expression})
	return p.self
}

// TargetName sets the metadata.name template of the object the policy
// creates.
func (p policy[W]) TargetName(name string) W {
	p.target.Name = name
	return p.self
}

// TargetNamespace sets the metadata.namespace template of the object the
// policy creates.
func (p policy[W]) TargetNamespace(namespace string) W {
	p.target.Namespace = namespace
	return p.self
}

// TargetLabel sets a label of the object the policy creates (its value may
// be a template).
func (p policy[W]) TargetLabel(key, value string) W {
	if p.target.Labels == nil {
		p.target.Labels = map[string]string{}
	}
	p.target.Labels[key] = value
	return p.self
}

// TargetAnnotation sets an annotation of the object the policy creates (its
// value may be a template).
func (p policy[W]) TargetAnnotation(key, value string) W {
	if p.target.Annotations == nil {
		p.target.Annotations = map[string]string{}
	}
	p.target.Annotations[key] = value
	return p.self
}

// Disabled sets spec.disabled.
func (p policy[W]) Disabled() W {
	*p.disabled = true
	return p.self
}

// Generation sets metadata.generation.
func (p policy[W]) Generation(g int64) W {
	p.meta.Generation = g
	return p.self
}

// Ready sets the Ready condition with status and reason for the current
// generation.
func (p policy[W]) Ready(status metav1.ConditionStatus, reason, message string) W {
	p.status.ObservedGeneration = p.meta.Generation
	p.status.Conditions = append(p.status.Conditions, condition(quotav1alpha1.ConditionReady, status, p.meta.Generation, reason, message))
	return p.self
}
