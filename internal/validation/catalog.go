package validation

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// State is how far a resource type's registration has got.
type State int

const (
	// Unregistered: no ResourceRegistration declares the resource type.
	Unregistered State = iota
	// Inactive: registrations exist but none is active (refused as a
	// duplicate, or being deleted).
	Inactive
	// Pending: a registration exists that the registration controller has
	// not judged yet (just created or edited).
	Pending
	// Active: a registration is Active for its current generation.
	Active
)

// Catalog answers which registration governs a resource type. Webhooks and
// controllers build one from the same cached list, so both judge a grant or
// claim by the same rules; quotactl builds an offline one from files.
type Catalog struct {
	byType map[string][]*quotav1alpha1.ResourceRegistration
	// offline counts registrations not judged yet as active.
	offline bool
}

// NewCatalog indexes registrations by resource type.
func NewCatalog(regs []quotav1alpha1.ResourceRegistration) *Catalog {
	c := &Catalog{byType: map[string][]*quotav1alpha1.ResourceRegistration{}}
	for i := range regs {
		r := &regs[i]
		c.byType[r.Spec.ResourceType] = append(c.byType[r.Spec.ResourceType], r)
	}
	for _, rs := range c.byType {
		slices.SortFunc(rs, func(a, b *quotav1alpha1.ResourceRegistration) int { return strings.Compare(a.Name, b.Name) })
	}
	return c
}

// NewOfflineCatalog is a Catalog for registrations read from files
// (quotactl), which no registration controller has judged: one not judged
// yet counts as active, as the controller would judge a lone registration
// of its resource type. A registration whose status says otherwise (being
// deleted, or refused) still counts as inactive.
func NewOfflineCatalog(regs []quotav1alpha1.ResourceRegistration) *Catalog {
	c := NewCatalog(regs)
	c.offline = true
	return c
}

// Lookup returns the registration that governs resourceType and its state:
// the active one if there is one, else one not judged yet, else an inactive
// one (nil when unregistered).
func (c *Catalog) Lookup(resourceType string) (*quotav1alpha1.ResourceRegistration, State) {
	var pending, inactive *quotav1alpha1.ResourceRegistration
	for _, r := range c.byType[resourceType] {
		state := RegistrationState(r)
		if c.offline && state == Pending {
			state = Active
		}
		switch state {
		case Active:
			return r, Active
		case Pending:
			if pending == nil {
				pending = r
			}
		default:
			if inactive == nil {
				inactive = r
			}
		}
	}
	switch {
	case pending != nil:
		return pending, Pending
	case inactive != nil:
		return inactive, Inactive
	}
	return nil, Unregistered
}

// RegistrationState is one registration's own state.
func RegistrationState(r *quotav1alpha1.ResourceRegistration) State {
	if r.DeletionTimestamp != nil {
		return Inactive
	}
	switch conds := r.Status.Conditions; {
	case !quotav1alpha1.IsCurrent(conds, quotav1alpha1.ConditionActive, r.Generation):
		return Pending
	case quotav1alpha1.IsTrue(conds, quotav1alpha1.ConditionActive, r.Generation):
		return Active
	}
	return Inactive
}

// inactiveReason explains why an inactive registration does not count.
func inactiveReason(r *quotav1alpha1.ResourceRegistration) string {
	if r.DeletionTimestamp != nil {
		return "it is being deleted"
	}
	if cond := meta.FindStatusCondition(r.Status.Conditions, quotav1alpha1.ConditionActive); cond != nil && cond.Message != "" {
		return cond.Message
	}
	return "it is not active"
}
