package controllers

// The GrantCreationPolicy controller's trigger work: render the policy for
// one trigger and keep exactly the grant it renders.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotakeeper/quotakeeper/api/names"
	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/eventnote"
)

// Event types, reasons and why a grant was deleted.
const (
	eventNormal  = corev1.EventTypeNormal
	eventWarning = corev1.EventTypeWarning

	reasonGrantCreated = "GrantCreated"
	reasonGrantUpdated = "GrantUpdated"
	reasonGrantDeleted = "GrantDeleted"
	reasonGrantFailed  = "GrantFailed"
	reasonWatchFailed  = "WatchFailed"

	whyTriggerGone    = "the trigger is gone"
	whyConditionsFail = "the policy's conditions do not hold"
)

// triggerRun is one trigger work: the policy, what it compiled to, and the
// trigger.
type triggerRun struct {
	policy *quotav1alpha1.GrantCreationPolicy
	wp     *watchingPolicy
	key    triggerKey
	// owned are the grants the policy made for this trigger.
	owned []quotav1alpha1.ResourceGrant
}

func (r *grantPolicyReconciler) reconcileTrigger(ctx context.Context, policy string, key triggerKey) error {
	p, err := r.activePolicy(ctx, policy)
	if err != nil || p == nil {
		return err
	}
	wp := r.policyWatching(policy)
	if wp == nil || wp.uid != p.UID || wp.generation != p.Generation {
		// The policy's own work, which comes next, watches its kinds and
		// brings this trigger back.
		return nil
	}
	run := &triggerRun{policy: p, wp: wp, key: key}
	var grants quotav1alpha1.ResourceGrantList
	if err := r.client.List(ctx, &grants, client.MatchingFields{indexGrantPolicyTrigger: policyTriggerKey(policy, string(key.UID))}); err != nil {
		return err
	}
	run.owned = grants.Items

	trigger := &unstructured.Unstructured{}
	trigger.SetGroupVersionKind(wp.trigger)
	err = r.watches.Reader().Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, trigger)
	switch {
	case notWatched(err):
		return nil // the policy's watch is not up yet; once it is, its work brings this trigger back
	case apierrors.IsNotFound(err):
		return r.deleteGrants(ctx, run, run.owned, whyTriggerGone)
	case err != nil:
		return err
	case trigger.GetUID() != key.UID || trigger.GetDeletionTimestamp() != nil:
		return r.deleteGrants(ctx, run, run.owned, whyTriggerGone)
	}

	res, err := wp.compiled.Render(ctx, trigger.Object)
	if err != nil {
		// The grant it made stays: a render that fails says nothing
		// about whether the trigger should have quota.
		r.grantEvent(run, nil, eventWarning, reasonGrantFailed, "Render", "could not render", err.Error())
		return nil
	}
	if !res.Applies {
		return r.deleteGrants(ctx, run, run.owned, whyConditionsFail)
	}
	var parent *unstructured.Unstructured
	if wp.parent != nil {
		parent = &unstructured.Unstructured{}
		parent.SetGroupVersionKind(*wp.parent)
		err := r.watches.Reader().Get(ctx, client.ObjectKey{Name: res.ParentName}, parent)
		if apierrors.IsNotFound(err) {
			return r.deleteGrants(ctx, run, run.owned, fmt.Sprintf("parent %s %s does not exist", wp.parent.Kind, res.ParentName))
		}
		if notWatched(err) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	desired, err := r.desiredGrant(run, trigger, parent, res.Grant)
	if err != nil {
		return err
	}
	return r.ensureGrant(ctx, run, desired)
}

// notWatched reports a read of a kind whose informer is not running.
func notWatched(err error) bool {
	var nc *cache.ErrResourceNotCached
	return errors.As(err, &nc)
}

// desiredGrant completes the rendered grant: its namespace (where its
// consumer's buckets live, when the template leaves it out), the policy
// and trigger labels and annotation, and its owner references: the trigger
// as controller where Kubernetes allows it (a cluster-scoped trigger, or
// one in the grant's namespace; an owner in another namespace would read as
// missing and get the grant collected), and the parent.
func (r *grantPolicyReconciler) desiredGrant(run *triggerRun, trigger, parent *unstructured.Unstructured, rendered *quotav1alpha1.ResourceGrant) (*quotav1alpha1.ResourceGrant, error) {
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{
		Name: rendered.Name, GenerateName: rendered.GenerateName, Namespace: rendered.Namespace,
		Labels: map[string]string{}, Annotations: map[string]string{},
	}}
	if g.Name == "" && g.GenerateName == "" {
		g.Name = defaultGrantName(run.policy.Name, run.key)
	}
	if g.Namespace == "" {
		g.Namespace = quotav1alpha1.BucketNamespace(rendered.Spec.ConsumerRef, r.systemNamespace)
	}
	maps.Copy(g.Labels, rendered.Labels)
	maps.Copy(g.Annotations, rendered.Annotations)
	g.Labels[quotav1alpha1.LabelPolicy] = run.policy.Name
	g.Labels[quotav1alpha1.LabelTriggerUID] = string(run.key.UID)
	g.Annotations[quotav1alpha1.AnnotationTrigger] = run.key.String()
	if trigger.GetNamespace() == "" || trigger.GetNamespace() == g.Namespace {
		g.OwnerReferences = append(g.OwnerReferences, ownerRef(trigger, true))
	}
	if parent != nil {
		g.OwnerReferences = append(g.OwnerReferences, ownerRef(parent, false))
	}
	// The spec as the API server will store it, so that comparing it with
	// the stored grant sees no difference that is only empty versus nil.
	raw, err := json.Marshal(rendered.Spec)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &g.Spec); err != nil {
		return nil, err
	}
	return g, nil
}

// defaultGrantName names the grant of a template that names none: Milo's
// <policy>-<trigger>-grant, with the trigger's namespace before its name
// when it has one (two triggers of one name may feed one consumer), or a
// readable prefix and a hash when that is no name.
func defaultGrantName(policy string, key triggerKey) string {
	name := policy + "-" + key.Name + "-grant"
	if key.Namespace != "" {
		name = policy + "-" + key.Namespace + "-" + key.Name + "-grant"
	}
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	return defaultGrantNames.Name(name, policy, key.Namespace, key.Name)
}

var defaultGrantNames = names.Scheme{Tag: "quotakeeper.policy-grant/v1", Fallback: "grant", PrefixMax: 80, HashBytes: 8}

// ownerRef is a reference to obj. It does not block the owner's deletion:
// that would need update on every trigger kind's finalizers where
// OwnerReferencesPermissionEnforcement runs, and the controller deletes the
// grant itself anyway.
func ownerRef(obj *unstructured.Unstructured, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(), UID: obj.GetUID(),
		Controller: ptr.To(controller),
	}
}

// ensureGrant makes the policy's grants for the trigger exactly the
// desired one: it creates it, or updates the grant that has its name (any
// name with its generateName prefix), and deletes any other.
func (r *grantPolicyReconciler) ensureGrant(ctx context.Context, run *triggerRun, desired *quotav1alpha1.ResourceGrant) error {
	var current *quotav1alpha1.ResourceGrant
	var others []quotav1alpha1.ResourceGrant
	for i := range run.owned {
		g := &run.owned[i]
		if current == nil && sameGrant(g, desired) {
			current = g
			continue
		}
		others = append(others, *g)
	}
	var err error
	switch {
	case current == nil:
		current, err = r.createGrant(ctx, run, desired)
	case grantDiffers(current, desired):
		err = r.updateGrant(ctx, run, current, desired)
	}
	if err != nil || current == nil {
		return err
	}
	return r.deleteGrants(ctx, run, others, "replaced by "+grantRef(current))
}

// sameGrant reports whether g is the grant desired names: the same
// namespace and name, or a name with its generateName prefix.
func sameGrant(g, desired *quotav1alpha1.ResourceGrant) bool {
	if g.Namespace != desired.Namespace {
		return false
	}
	if desired.Name != "" {
		return g.Name == desired.Name
	}
	return strings.HasPrefix(g.Name, desired.GenerateName)
}

// grantDiffers reports whether current differs from desired in anything
// the policy decides: labels, annotations, owner references, spec. The
// policy owns all of them; an edit by hand is put back.
func grantDiffers(current, desired *quotav1alpha1.ResourceGrant) bool {
	return !maps.Equal(current.Labels, desired.Labels) ||
		!maps.Equal(current.Annotations, desired.Annotations) ||
		!slices.EqualFunc(current.OwnerReferences, desired.OwnerReferences, func(a, b metav1.OwnerReference) bool {
			return equality.Semantic.DeepEqual(a, b)
		}) ||
		!equality.Semantic.DeepEqual(current.Spec, desired.Spec)
}

// createGrant creates desired, unless a grant of that name that is not
// this policy's for this trigger is in the way. It returns the grant it
// created, or nil.
func (r *grantPolicyReconciler) createGrant(ctx context.Context, run *triggerRun, desired *quotav1alpha1.ResourceGrant) (*quotav1alpha1.ResourceGrant, error) {
	if desired.Name == "" {
		// The cache may not show a grant created a moment ago under a
		// generated name; a second one would double the quota.
		var made quotav1alpha1.ResourceGrantList
		if err := r.live.List(ctx, &made, client.InNamespace(desired.Namespace), client.MatchingLabels{
			quotav1alpha1.LabelPolicy: run.policy.Name, quotav1alpha1.LabelTriggerUID: string(run.key.UID),
		}); err != nil {
			return nil, err
		}
		if len(made.Items) > 0 {
			return nil, nil // its event brings this trigger back
		}
	}
	g := desired.DeepCopy()
	err := r.client.Create(ctx, g, client.FieldOwner(grantPolicyController))
	if apierrors.IsAlreadyExists(err) {
		existing := &quotav1alpha1.ResourceGrant{}
		if err := r.live.Get(ctx, client.ObjectKeyFromObject(desired), existing); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		if existing.Labels[quotav1alpha1.LabelPolicy] == run.policy.Name && existing.Labels[quotav1alpha1.LabelTriggerUID] == string(run.key.UID) {
			return nil, nil // ours, not in the cache yet; its event brings this trigger back
		}
		r.grantEvent(run, desired, eventWarning, reasonGrantFailed, "Create", "could not create",
			"a grant of that name exists and was not created by this policy for this trigger")
		return nil, nil // waiting will not help; the grant's owner must act
	}
	if err != nil {
		r.grantEvent(run, desired, eventWarning, reasonGrantFailed, "Create", "could not create", err.Error())
		return nil, err
	}
	r.grantEvent(run, g, eventNormal, reasonGrantCreated, "Create", "created", "")
	return g, nil
}

func (r *grantPolicyReconciler) updateGrant(ctx context.Context, run *triggerRun, current, desired *quotav1alpha1.ResourceGrant) error {
	g := current.DeepCopy()
	g.Labels, g.Annotations, g.OwnerReferences, g.Spec = desired.Labels, desired.Annotations, desired.OwnerReferences, desired.Spec
	err := r.client.Update(ctx, g, client.FieldOwner(grantPolicyController))
	if apierrors.IsConflict(err) {
		return nil // the grant's event brings this trigger back to a fresher cache
	}
	if err != nil {
		r.grantEvent(run, g, eventWarning, reasonGrantFailed, "Update", "could not update", err.Error())
		return err
	}
	r.grantEvent(run, g, eventNormal, reasonGrantUpdated, "Update", "updated", "")
	return nil
}

// deleteGrants deletes grants the policy made for the trigger, saying why.
func (r *grantPolicyReconciler) deleteGrants(ctx context.Context, run *triggerRun, grants []quotav1alpha1.ResourceGrant, why string) error {
	for i := range grants {
		g := &grants[i]
		if g.DeletionTimestamp != nil {
			continue
		}
		err := r.client.Delete(ctx, g, client.Preconditions{UID: &g.UID})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue // gone already, or a newer grant under that name
		}
		if err != nil {
			r.grantEvent(run, g, eventWarning, reasonGrantFailed, "Delete", "could not delete", err.Error())
			return err
		}
		r.grantEvent(run, g, eventNormal, reasonGrantDeleted, "Delete", "deleted", why)
	}
	return nil
}

// grantRef is namespace/name, or namespace/generateName* before a
// generated name is known.
func grantRef(g *quotav1alpha1.ResourceGrant) string {
	if g.Name == "" {
		return g.Namespace + "/" + g.GenerateName + "*"
	}
	return g.Namespace + "/" + g.Name
}

// grantEvent records what happened to a grant on the trigger and on the
// policy: "<done> ResourceGrant <ns/name> (GrantCreationPolicy <p>)[: why]"
// on the trigger, "<done> ResourceGrant <ns/name> for <Kind> <trigger>[: why]"
// on the policy. g is nil when there is no grant yet. The grant is the
// event's related object: the events API folds events that differ only in
// their note into one series, so events about two grants must differ in it.
func (r *grantPolicyReconciler) grantEvent(run *triggerRun, g *quotav1alpha1.ResourceGrant, eventtype, reason, action, done, why string) {
	what := "ResourceGrant"
	var related *corev1.ObjectReference
	if g != nil {
		what += " " + grantRef(g)
		if g.Name != "" {
			related = &corev1.ObjectReference{APIVersion: quotav1alpha1.GroupVersion.String(), Kind: "ResourceGrant",
				Namespace: g.Namespace, Name: g.Name, UID: g.UID}
		}
	}
	suffix := ""
	if why != "" {
		suffix = ": " + why
	}
	trigger := &corev1.ObjectReference{
		APIVersion: run.wp.trigger.GroupVersion().String(), Kind: run.wp.trigger.Kind,
		Namespace: run.key.Namespace, Name: run.key.Name, UID: run.key.UID,
	}
	var triggerRelated runtime.Object // a typed nil would not read as none
	if related != nil {
		triggerRelated = related
	}
	r.events.Eventf(trigger, triggerRelated, eventtype, reason, action, "%s",
		eventnote.Fit(fmt.Sprintf("%s %s (GrantCreationPolicy %s)%s", done, what, run.policy.Name, suffix)))
	policyRelated := trigger
	if related != nil {
		policyRelated = related
	}
	r.policyEvent(run.policy, policyRelated, eventtype, reason, action,
		fmt.Sprintf("%s %s for %s %s%s", done, what, run.wp.trigger.Kind, run.key, suffix))
}

func (r *grantPolicyReconciler) policyEvent(p *quotav1alpha1.GrantCreationPolicy, related runtime.Object, eventtype, reason, action, note string) {
	r.events.Eventf(p, related, eventtype, reason, action, "%s", eventnote.Fit(note))
}
