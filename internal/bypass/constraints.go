// Package bypass carries out a QuotaBypass (the break-glass procedure) on
// Gatekeeper's constraints. Gatekeeper decides deny or warn per constraint,
// from its spec.enforcementAction, outside any Rego; so a bypass relaxes
// each constraint it names to warn, and records on the constraint what to
// put back:
//
//	quota.miloapis.com/bypass: <the QuotaBypass's name>
//	quota.miloapis.com/enforcement-action: <the action before>
//
// Restoring puts the recorded action back and removes both annotations,
// unless another active bypass also names the constraint: that one then
// takes it over. Relax and Restore are idempotent, so any number of
// processes (the manager's controller; each Gatekeeper replica's plugin when
// the manager is down) may run them at once: every write is a
// compare-and-swap on the constraint's resourceVersion.
package bypass

import (
	"context"
	"fmt"
	"time"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/util"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// ConstraintGroupVersion is where Gatekeeper serves every template's
// constraint kind.
var ConstraintGroupVersion = schema.GroupVersion{Group: "constraints.gatekeeper.sh", Version: "v1beta1"}

// Warn is the action a relaxed constraint has.
const Warn = string(util.Warn)

// OriginalAction returns the enforcement action a constraint relaxed by a
// bypass had before, and whether it is relaxed at all.
func OriginalAction(u *unstructured.Unstructured) (string, bool) {
	a := u.GetAnnotations()
	if a[quotav1alpha1.AnnotationBypass] == "" {
		return "", false
	}
	return a[quotav1alpha1.AnnotationEnforcementAction], true
}

// constraints returns the constraints b names, read from r (an uncached
// reader: a bypass is rare and must see the constraints as stored). A kind
// the API server does not serve (its template is gone) has none.
func constraints(ctx context.Context, r client.Reader, b *quotav1alpha1.QuotaBypass) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	seen := map[string]bool{}
	for _, c := range b.Spec.Constraints {
		gvk := ConstraintGroupVersion.WithKind(c.Kind)
		var found []unstructured.Unstructured
		if c.Name == "*" {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(c.Kind + "List"))
			if err := r.List(ctx, list); err != nil {
				if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("list %s constraints: %w", c.Kind, err)
			}
			found = list.Items
		} else {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			if err := r.Get(ctx, client.ObjectKey{Name: c.Name}, u); err != nil {
				if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("get %s %s: %w", c.Kind, c.Name, err)
			}
			found = []unstructured.Unstructured{*u}
		}
		for i := range found {
			if key := c.Kind + "/" + found[i].GetName(); !seen[key] {
				seen[key] = true
				out = append(out, &found[i])
			}
		}
	}
	return out, nil
}

// Relax sets every deny (or scoped) constraint b names to warn, annotated
// with b's name and the action before, and returns the constraints b holds
// relaxed. A constraint that already warns or only audits is left alone (it
// denies nothing); one another bypass holds stays with that bypass (and is
// reported, since it is relaxed).
func Relax(ctx context.Context, r client.Reader, w client.Writer, b *quotav1alpha1.QuotaBypass) ([]quotav1alpha1.RelaxedConstraint, error) {
	cs, err := constraints(ctx, r, b)
	if err != nil {
		return nil, err
	}
	var relaxed []quotav1alpha1.RelaxedConstraint
	for _, u := range cs {
		if original, ok := OriginalAction(u); ok {
			relaxed = append(relaxed, quotav1alpha1.RelaxedConstraint{Kind: u.GetKind(), Name: u.GetName(), EnforcementAction: original})
			continue
		}
		action, err := util.GetEnforcementAction(u.Object)
		if err != nil || (action != util.Deny && action != util.Scoped) {
			continue
		}
		patch := client.MergeFromWithOptions(u.DeepCopy(), client.MergeFromWithOptimisticLock{})
		annotations := u.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[quotav1alpha1.AnnotationBypass] = b.Name
		annotations[quotav1alpha1.AnnotationEnforcementAction] = string(action)
		u.SetAnnotations(annotations)
		if err := unstructured.SetNestedField(u.Object, Warn, "spec", "enforcementAction"); err != nil {
			return nil, err
		}
		if err := w.Patch(ctx, u, patch); err != nil {
			return nil, fmt.Errorf("relax %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		relaxed = append(relaxed, quotav1alpha1.RelaxedConstraint{Kind: u.GetKind(), Name: u.GetName(), EnforcementAction: string(action)})
	}
	return relaxed, nil
}

// Restore puts back the enforcement action of every constraint b names and
// holds relaxed, or hands it to another bypass among others that is active
// at now and names it too. Constraints held by another bypass are left
// alone.
func Restore(ctx context.Context, r client.Reader, w client.Writer, b *quotav1alpha1.QuotaBypass, others []quotav1alpha1.QuotaBypass, now time.Time) error {
	cs, err := constraints(ctx, r, b)
	if err != nil {
		return err
	}
	for _, u := range cs {
		original, ok := OriginalAction(u)
		if !ok || u.GetAnnotations()[quotav1alpha1.AnnotationBypass] != b.Name {
			continue
		}
		patch := client.MergeFromWithOptions(u.DeepCopy(), client.MergeFromWithOptimisticLock{})
		annotations := u.GetAnnotations()
		if heir := activeHeir(others, b.Name, u.GetKind(), u.GetName(), now); heir != "" {
			annotations[quotav1alpha1.AnnotationBypass] = heir
			u.SetAnnotations(annotations)
		} else {
			if original == "" {
				original = string(util.Deny)
			}
			delete(annotations, quotav1alpha1.AnnotationBypass)
			delete(annotations, quotav1alpha1.AnnotationEnforcementAction)
			u.SetAnnotations(annotations)
			if err := unstructured.SetNestedField(u.Object, original, "spec", "enforcementAction"); err != nil {
				return err
			}
		}
		if err := w.Patch(ctx, u, patch); err != nil {
			return fmt.Errorf("restore %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// Holding returns the constraints (kind/name) that b names and still holds
// relaxed: annotated with b's name. A bypass's finalizer may go only once
// there are none, or nobody would ever restore them.
func Holding(ctx context.Context, r client.Reader, b *quotav1alpha1.QuotaBypass) ([]string, error) {
	cs, err := constraints(ctx, r, b)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, u := range cs {
		if u.GetAnnotations()[quotav1alpha1.AnnotationBypass] == b.Name {
			out = append(out, u.GetKind()+"/"+u.GetName())
		}
	}
	return out, nil
}

// activeHeir is the name of another bypass active at now that names
// kind/name, or "".
func activeHeir(others []quotav1alpha1.QuotaBypass, self, kind, name string, now time.Time) string {
	for i := range others {
		if o := &others[i]; o.Name != self && o.ActiveAt(now) && o.Matches(kind, name) {
			return o.Name
		}
	}
	return ""
}
