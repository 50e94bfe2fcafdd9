// Package quotafile reads ResourceRegistrations and ResourceGrants from YAML
// files into an in-memory ledger, and ClaimCreationPolicies into the set the
// QuotaClaimPolicy template renders: the quota state of a quotactl verify
// case or of a `quotactl opa` session.
package quotafile

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/reader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/celpolicy"
	"github.com/quotakeeper/quotakeeper/internal/claimpolicies"
	"github.com/quotakeeper/quotakeeper/internal/grants"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/validation"
)

// Set is the registrations, grants and ClaimCreationPolicies read so far.
type Set struct {
	registrations map[string]*v1alpha1.ResourceRegistration // by spec.resourceType
	grants        []sourced[*v1alpha1.ResourceGrant]
	policies      map[string]*v1alpha1.ClaimCreationPolicy // by name
}

type sourced[T any] struct {
	path string
	obj  T
}

// Read adds the objects in the YAML file at path (any number of documents).
// Every document must be a quota.miloapis.com/v1alpha1 ResourceRegistration,
// ResourceGrant or ClaimCreationPolicy; unknown fields are errors, as the
// API server would reject them, and so is a policy whose CEL does not
// compile, as the validating webhook would.
func (s *Set) Read(fsys fs.FS, path string) error {
	data, err := fs.ReadFile(fsys, path)
	if err != nil {
		return err
	}
	objs, err := reader.ReadUnstructureds(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(objs) == 0 {
		return fmt.Errorf("%s: no objects", path)
	}
	for i, u := range objs {
		if err := s.add(path, u); err != nil {
			return fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
	}
	return nil
}

func (s *Set) add(path string, u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	if gvk.GroupVersion() != v1alpha1.GroupVersion {
		return fmt.Errorf("%s %s: want apiVersion %s", gvk.GroupVersion(), gvk.Kind, v1alpha1.GroupVersion)
	}
	switch gvk.Kind {
	case "ResourceRegistration":
		reg := &v1alpha1.ResourceRegistration{}
		if err := fromUnstructured(u, reg); err != nil {
			return err
		}
		if reg.Spec.ResourceType == "" {
			return fmt.Errorf("ResourceRegistration %s: spec.resourceType: Required value", reg.Name)
		}
		if errs := validation.ValidateRegistration(reg); len(errs) > 0 {
			return fmt.Errorf("ResourceRegistration %s: %w", reg.Name, errs.ToAggregate())
		}
		if s.registrations == nil {
			s.registrations = map[string]*v1alpha1.ResourceRegistration{}
		}
		if old, dup := s.registrations[reg.Spec.ResourceType]; dup {
			return fmt.Errorf("ResourceRegistration %s: resource type %s is already registered by %s", reg.Name, reg.Spec.ResourceType, old.Name)
		}
		s.registrations[reg.Spec.ResourceType] = reg
	case "ResourceGrant":
		g := &v1alpha1.ResourceGrant{}
		if err := fromUnstructured(u, g); err != nil {
			return err
		}
		s.grants = append(s.grants, sourced[*v1alpha1.ResourceGrant]{path: path, obj: g})
	case "ClaimCreationPolicy":
		p := &v1alpha1.ClaimCreationPolicy{}
		if err := fromUnstructured(u, p); err != nil {
			return err
		}
		if _, errs := celpolicy.CompileClaimPolicy(p); len(errs) > 0 {
			return fmt.Errorf("ClaimCreationPolicy %s: %w", p.Name, errs.ToAggregate())
		}
		if _, dup := s.policies[p.Name]; dup {
			return fmt.Errorf("ClaimCreationPolicy %s: read twice", p.Name)
		}
		if s.policies == nil {
			s.policies = map[string]*v1alpha1.ClaimCreationPolicy{}
		}
		s.policies[p.Name] = p
	default:
		return fmt.Errorf("kind %s: want ResourceRegistration, ResourceGrant or ClaimCreationPolicy", gvk.Kind)
	}
	return nil
}

// UnitsFor implements builtins.UnitSource: the units of the registration
// of resourceType read (every one read counts as active, as for Grants).
func (s *Set) UnitsFor(resourceType string) (v1alpha1.Units, bool) {
	reg, ok := s.registrations[resourceType]
	if !ok {
		return v1alpha1.Units{}, false
	}
	return v1alpha1.UnitsOf(reg), true
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// Grants converts every grant read into ledger grants. When any registration
// was read, each grant must also pass the grant webhook's judgement
// (package validation: where it lives, registered resource type, matching
// consumer kind, declared dimensions, sums within int64) before it counts.
// No controller judges the registrations of a file, so every one read counts
// as active (validation.NewOfflineCatalog).
func (s *Set) Grants() ([]ledger.Grant, error) {
	var out []ledger.Grant
	var errs []error
	var cat *validation.Catalog
	var all []v1alpha1.ResourceGrant
	if len(s.registrations) > 0 {
		regs := make([]v1alpha1.ResourceRegistration, 0, len(s.registrations))
		for _, r := range s.registrations {
			regs = append(regs, *r)
		}
		cat = validation.NewOfflineCatalog(regs)
		for _, g := range s.grants {
			all = append(all, *g.obj)
		}
	}
	for _, g := range s.grants {
		if cat != nil {
			verdict := validation.ValidateGrant(g.obj, cat, v1alpha1.DefaultSystemNamespace)
			fe := append(verdict.Errors, validation.ValidateGrantTotals(g.obj, all)...)
			if len(fe) > 0 {
				errs = append(errs, fmt.Errorf("%s: ResourceGrant %s/%s: %w", g.path, g.obj.Namespace, g.obj.Name, fe.ToAggregate()))
				continue
			}
		}
		lg, err := grants.FromResourceGrant(g.obj)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", g.path, err))
			continue
		}
		out = append(out, lg...)
	}
	return out, errors.Join(errs...)
}

// Ledger returns a fresh memory-store ledger over the grants read.
func (s *Set) Ledger(opts ...ledger.Option) (*ledger.Ledger, error) {
	set, err := s.GrantSet()
	if err != nil {
		return nil, err
	}
	return ledger.New(ledger.NewMemoryStore(), set, opts...), nil
}

// GrantSet returns the grants read as a GrantSource, for a caller that
// builds its ledger over a store of its own. Delegated grants must fit
// their parents' caps (handOuts).
func (s *Set) GrantSet() (*ledger.GrantSet, error) {
	gs, err := s.Grants()
	if err != nil {
		return nil, err
	}
	set := ledger.NewGrantSet()
	if err := set.Set(gs...); err != nil {
		return nil, err
	}
	if err := handOuts(set, s.grants); err != nil {
		return nil, err
	}
	return set, nil
}

// ClaimPolicies returns the ClaimCreationPolicies read, as the
// QuotaClaimPolicy template's builtin resolves them. No status controller
// judges a file: a policy is in force unless spec.disabled is set (or a
// status it carries says otherwise), and a constraint may name it without a
// generation.
func (s *Set) ClaimPolicies() *claimpolicies.Set {
	set := claimpolicies.NewSet()
	for _, p := range s.policies {
		set.Put(p)
	}
	return set
}
