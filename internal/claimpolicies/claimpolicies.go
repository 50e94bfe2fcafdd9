// Package claimpolicies holds the ClaimCreationPolicies a process enforces:
// each compiled with celpolicy, looked up by name, with whether it is in
// force, and renders the claim a policy makes for one admission.
//
// Three processes read policies this way and must read them alike:
// Gatekeeper's plugin (the quota.policy_claim builtin at admission and in
// audit), the manager's observer (the same builtin, counting existing
// objects) and quotactl (suites, offline). It is separate from package
// builtins so that the builtin knows no informer, and from celpolicy, which
// compiles one policy and knows nothing of others or of their status.
//
// # Which policy is in force
//
// The manager keeps one QuotaClaimPolicy constraint per Ready policy, whose
// parameters name the policy and its generation. A lookup asks for at least
// that generation: an older copy (this process's cache lags the manager's)
// is an error, so admission denies until the cache catches up rather than
// enforce a spec the constraint does not describe. The copy found is in
// force unless spec.disabled is set or its Ready condition is False for its
// generation: the constraint is then about to be deleted, and the policy
// claims nothing meanwhile. A generation the status controller has not
// judged yet is in force: the validating webhook compiled it, and the
// status only adds checks against registrations, which the ledger repeats
// (no grant, no quota).
//
// # Whom a policy may charge
//
// A policy's consumer and claim namespace are rendered from the object, and
// the tenant writes the object. So a rendered claim is judged as the claim
// webhook judges a ResourceClaim in the object's namespace, by the same
// code (validation.ClaimConsumer): that namespace must belong to the
// consumer, and the claim must live there. Claim refuses any other with an
// *Error, which admission denies with and the observer counts as nothing.
package claimpolicies

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/celpolicy"
)

// Set is the ClaimCreationPolicies of one process, compiled, by name. Safe
// for concurrent use.
type Set struct {
	mu     sync.RWMutex
	byName map[string]*entry

	// reader, when set, is read on a miss: a policy absent from the set, or
	// older than asked for (Watch).
	reader       client.Reader
	registration toolscache.ResourceEventHandlerRegistration

	// sysNamespace: SetSystemNamespace.
	sysNamespace string
}

// entry is one policy as the set holds it.
type entry struct {
	generation int64
	trigger    schema.GroupKind
	// compiled is nil when errs says why the policy does not compile.
	compiled *celpolicy.ClaimPolicy
	errs     error
	// inactive says why the policy claims nothing; "" when it is in force.
	inactive string
}

// NewSet returns a set holding the given policies (quotactl, tests); Watch
// connects one to a cluster.
func NewSet(policies ...*quotav1alpha1.ClaimCreationPolicy) *Set {
	s := &Set{byName: map[string]*entry{}}
	for _, p := range policies {
		s.Put(p)
	}
	return s
}

// Put compiles p and holds it under its name, replacing what was there.
func (s *Set) Put(p *quotav1alpha1.ClaimCreationPolicy) {
	e := &entry{generation: p.Generation}
	e.trigger = schema.FromAPIVersionAndKind(p.Spec.Trigger.Resource.APIVersion, p.Spec.Trigger.Resource.Kind).GroupKind()
	compiled, errs := celpolicy.CompileClaimPolicy(p)
	if len(errs) > 0 {
		e.errs = errs.ToAggregate()
	} else {
		e.compiled = compiled
	}
	switch ready := quotav1alpha1.CurrentCondition(p.Status.Conditions, quotav1alpha1.ConditionReady, p.Generation); {
	case p.Spec.Disabled:
		e.inactive = "spec.disabled is true"
	case ready != nil && ready.Status != metav1.ConditionTrue:
		e.inactive = fmt.Sprintf("not Ready (%s: %s)", ready.Reason, ready.Message)
	}
	s.mu.Lock()
	s.byName[p.Name] = e
	s.mu.Unlock()
}

// Delete forgets the policy of that name.
func (s *Set) Delete(name string) {
	s.mu.Lock()
	delete(s.byName, name)
	s.mu.Unlock()
}

// Watch keeps the set in step with the ClaimCreationPolicy informer of a
// manager's cache, and reads a policy through reader (that cache) when a
// lookup misses: an informer's handlers run after its store is updated, so
// a controller that acted on a policy (the manager writing its constraint)
// may have seen it before the set did. Call before or after the cache
// starts; HasSynced turns true once the initial list is held.
func (s *Set) Watch(ctx context.Context, informers cache.Informers, reader client.Reader) error {
	inf, err := informers.GetInformer(ctx, &quotav1alpha1.ClaimCreationPolicy{})
	if err != nil {
		return fmt.Errorf("ClaimCreationPolicy informer: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.observe(obj) },
		UpdateFunc: func(_, obj any) { s.observe(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if p, ok := obj.(*quotav1alpha1.ClaimCreationPolicy); ok {
				s.Delete(p.Name)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("ClaimCreationPolicy informer handler: %w", err)
	}
	s.mu.Lock()
	s.reader, s.registration = reader, reg
	s.mu.Unlock()
	return nil
}

func (s *Set) observe(obj any) {
	if p, ok := obj.(*quotav1alpha1.ClaimCreationPolicy); ok {
		s.Put(p)
	}
}

// HasSynced reports whether a watched set holds the informer's initial
// list; a set that watches nothing is always synced.
func (s *Set) HasSynced() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.registration == nil || s.registration.HasSynced()
}

// lookup returns the policy of that name at generation or later, reading
// it through the reader on a miss.
func (s *Set) lookup(ctx context.Context, name string, generation int64) (*entry, error) {
	s.mu.RLock()
	e, reader := s.byName[name], s.reader
	s.mu.RUnlock()
	if (e == nil || e.generation < generation) && reader != nil {
		p := &quotav1alpha1.ClaimCreationPolicy{}
		switch err := reader.Get(ctx, client.ObjectKey{Name: name}, p); {
		case apierrors.IsNotFound(err):
			s.Delete(name)
		case err != nil:
			return nil, fmt.Errorf("reading ClaimCreationPolicy %q: %w", name, err)
		default:
			s.Put(p)
		}
		s.mu.RLock()
		e = s.byName[name]
		s.mu.RUnlock()
	}
	switch {
	case e == nil:
		return nil, &Error{Policy: name, Err: errors.New("not found")}
	case e.generation < generation:
		return nil, &Error{Policy: name, Err: fmt.Errorf("generation %d is not loaded yet (have %d); retry", generation, e.generation)}
	}
	return e, nil
}

// Error is why a policy cannot say what an object claims: it is missing,
// does not compile, or fails to render for this object. Admission denies
// with it.
type Error struct {
	Policy string
	Err    error
}

func (e *Error) Error() string { return fmt.Sprintf("ClaimCreationPolicy %q: %v", e.Policy, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// Claim renders what an object claims under the named policy: nil when the
// policy does not apply (a condition does not hold, the object is not of
// its trigger kind, or the policy is not in force). generation is the
// least generation the caller's constraint was made for (0: any); ns is the
// object's namespace, which the rendered claim must be allowed to claim
// from, as a ResourceClaim there would be (judge). Every reason the policy
// cannot decide, or renders a claim that namespace may not make, is an
// *Error; the caller denies with it.
func (s *Set) Claim(ctx context.Context, name string, generation int64, in celpolicy.ClaimInput, ns Namespace) (*quotav1alpha1.ResourceClaim, error) {
	e, err := s.lookup(ctx, name, generation)
	if err != nil {
		return nil, err
	}
	if e.inactive != "" || !isKind(in.Trigger, e.trigger) {
		return nil, nil
	}
	if e.errs != nil {
		return nil, &Error{Policy: name, Err: e.errs}
	}
	res, err := e.compiled.Render(ctx, in)
	if err != nil {
		return nil, &Error{Policy: name, Err: err}
	}
	if !res.Applies {
		return nil, nil
	}
	if ferr := s.judge(res.Claim, ns); ferr != nil {
		return nil, &Error{Policy: name, Err: ferr}
	}
	return res.Claim, nil
}

// isKind reports whether the object is of kind gk (any version): a
// constraint edited to match more kinds does not widen its policy.
func isKind(obj map[string]any, gk schema.GroupKind) bool {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		group = ""
	}
	return kind == gk.Kind && group == gk.Group
}
