package observer

// A namespace moved to another consumer (ledger.NamespaceMoveID): what its
// objects will count there, counted cold for the consumer-label guard, and
// when the observer may fold or expire the reservation the guard made.

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/claimpolicies"
	"github.com/quotakeeper/quotakeeper/internal/counting"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	quotarego "github.com/quotakeeper/quotakeeper/rego"
)

// MoveCounter tells what a namespace's objects will count once it carries
// other labels. It counts from the API server, with a constraint client of
// its own brought up to the quota templates and deny constraints as they
// are stored at each call: the guard that asks runs in every manager
// replica, and the observer, whose tally knows the same, only in the
// leader. A move is a platform team's rare act; its cost is a list of the
// templates and constraints (compiled again only when changed) and two
// evaluations per object of the namespace. Calls are serialized.
type MoveCounter struct {
	// Reader reads templates, constraints and objects; the API server
	// itself (a lagging cache would miss an object just created).
	Reader client.Reader
	Mapper meta.RESTMapper
	// ClaimPolicies are what the QuotaClaimPolicy template renders.
	ClaimPolicies *claimpolicies.Set

	mu     sync.Mutex
	policy *policy
}

// Cost returns, per bucket, what the objects of ns would count there with
// ns's labels beyond what they count with old's: the amount a reservation
// must hold until the observer counts them under the new labels. Only
// namespaced objects: a Namespace object's own count under a constraint
// that matches Namespaces is its UPDATE's, which Gatekeeper reviews.
func (m *MoveCounter) Cost(ctx context.Context, old, ns *corev1.Namespace) (map[ledger.BucketKey]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, err := m.loadPolicy(ctx)
	if err != nil {
		return nil, err
	}
	// Constraints that match every kind count nothing: the observer cannot
	// watch them either (watchMatchedKinds).
	kinds, _ := p.matchKinds()
	before, after := map[ledger.BucketKey]int64{}, map[ledger.BucketKey]int64{}
	for _, gk := range kinds {
		mapping, err := m.Mapper.RESTMapping(gk)
		if meta.IsNoMatchError(err) {
			continue // no such kind served: nothing of it to count
		}
		if err != nil {
			return nil, fmt.Errorf("kind %s: %w", gk, err)
		}
		if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			continue
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(mapping.GroupVersionKind.Kind + "List"))
		if err := m.Reader.List(ctx, list, client.InNamespace(ns.Name)); err != nil {
			return nil, fmt.Errorf("listing %s in namespace %s: %w", gk, ns.Name, err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			for _, side := range []struct {
				ns  *corev1.Namespace
				sum map[ledger.BucketKey]int64
			}{{old, before}, {ns, after}} {
				claims, _, err := p.evaluate(ctx, u, mapping, side.ns)
				if err != nil {
					return nil, err
				}
				amounts, err := recordedAmounts(claims)
				if err != nil {
					return nil, fmt.Errorf("%s %s/%s: %w", gk.Kind, u.GetNamespace(), u.GetName(), err)
				}
				for key, n := range amounts {
					if side.sum[key], err = ledger.Add(side.sum[key], n); err != nil {
						return nil, fmt.Errorf("namespace %s: %s: %w", ns.Name, key, err)
					}
				}
			}
		}
	}
	cost := map[ledger.BucketKey]int64{}
	for key, n := range after {
		if more := n - before[key]; more > 0 {
			cost[key] = more
		}
	}
	return cost, nil
}

// loadPolicy brings the constraint client up to the quota templates and
// their deny constraints as stored now.
func (m *MoveCounter) loadPolicy(ctx context.Context) (*policy, error) {
	if m.policy == nil {
		p, err := newPolicy(&builtins.Env{ClaimPolicies: m.ClaimPolicies})
		if err != nil {
			return nil, err
		}
		m.policy = p
	}
	p := m.policy
	templates := &unstructured.UnstructuredList{}
	templates.SetGroupVersionKind(templateGVK.GroupVersion().WithKind(templateGVK.Kind + "List"))
	if err := m.Reader.List(ctx, templates); err != nil {
		return nil, fmt.Errorf("listing ConstraintTemplates: %w", err)
	}
	stored := map[string]bool{}
	for i := range templates.Items {
		t := &templates.Items[i]
		if !quotarego.IsQuotaTemplate(t) || t.GetDeletionTimestamp() != nil {
			continue
		}
		stored[t.GetName()] = true
		kind, _, err := p.setTemplate(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", t.GetName(), err)
		}
		gvk := constraintGroupVersion.WithKind(kind)
		constraints := &unstructured.UnstructuredList{}
		constraints.SetGroupVersionKind(gvk.GroupVersion().WithKind(kind + "List"))
		if err := m.Reader.List(ctx, constraints); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue // Gatekeeper has not made the kind yet: none enforced
			}
			return nil, fmt.Errorf("listing %s constraints: %w", kind, err)
		}
		names := map[string]bool{}
		for j := range constraints.Items {
			c := &constraints.Items[j]
			names[c.GetName()] = true
			if _, err := p.setConstraint(ctx, gvk.GroupKind(), c.GetName(), c); err != nil {
				return nil, fmt.Errorf("constraint %s %s: %w", kind, c.GetName(), err)
			}
		}
		for _, name := range p.constraintNames(gvk.GroupKind()) {
			if !names[name] {
				if _, err := p.setConstraint(ctx, gvk.GroupKind(), name, nil); err != nil {
					return nil, fmt.Errorf("constraint %s %s: %w", kind, name, err)
				}
			}
		}
	}
	for _, name := range p.templateNames() {
		if !stored[name] {
			if _, err := p.removeTemplate(ctx, name); err != nil {
				return nil, fmt.Errorf("template %s: %w", name, err)
			}
		}
	}
	return p, nil
}

// recordedAmounts is Amounts of the claims an evaluation recorded.
func recordedAmounts(claims []builtins.RecordedClaim) (map[ledger.BucketKey]int64, error) {
	return counting.Amounts(builtins.ClaimsOf(claims))
}

// moveState is what the observer knows of a namespace a move reservation
// names. Evaluated under labels means with a namespace carrying them (the
// stamp's labels): only a change of labels evaluates its objects again.
type moveState struct {
	// counted: the namespace carries the labels the move named and every
	// object of it was evaluated under them: the observation counts them.
	counted bool
	// settled: the namespace is gone (or another with that name), or every
	// object of it was evaluated under the labels it carries now, whatever
	// they are: an expired reservation may go.
	settled bool
}

// moveOf decides a move reservation from the cache and the stamps: what
// the tally holds for the namespace's objects is what an observation
// computed after this call writes.
func (o *Observer) moveOf(ctx context.Context, r ledger.Reservation) (moveState, error) {
	uid, digest, _ := ledger.NamespaceMoveFor(r.ClaimID)
	ns := o.cachedNamespace(ctx, r.Object.Name)
	if ns == nil || string(ns.UID) != uid {
		return moveState{settled: true}, nil
	}
	o.mu.Lock()
	kinds := make(map[schema.GroupKind]bool, len(o.watched))
	for gk := range o.watched {
		kinds[gk] = o.whole[gk]
	}
	o.mu.Unlock()
	var refs []string
	for gk, whole := range kinds {
		o.mu.Lock()
		mapping := o.watched[gk]
		o.mu.Unlock()
		if mapping == nil || mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			continue
		}
		names, err := o.cachedNames(ctx, mapping.GroupVersionKind, whole, client.InNamespace(ns.Name))
		if err != nil {
			return moveState{}, err
		}
		for _, n := range names {
			refs = append(refs, item{gvk: mapping.GroupVersionKind, namespace: n.Namespace, name: n.Name}.ref())
		}
	}
	now := ledger.LabelsDigest(ns.Labels)
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, ref := range refs {
		if st, ok := o.stamps[ref]; !ok || st.labels != now {
			return moveState{}, nil
		}
	}
	return moveState{counted: now == digest, settled: true}, nil
}

// planMoves sorts a bucket's move reservations out of reservations: those
// to fold and expire, how many expired ones wait for their namespace, and
// the earliest expiry of those kept. It returns the other reservations.
func (o *Observer) planMoves(ctx context.Context, reservations []ledger.Reservation, notBefore map[string]time.Time, now time.Time) (rest []ledger.Reservation, p counting.Plan, waiting int, err error) {
	for _, r := range reservations {
		if _, _, ok := ledger.NamespaceMoveFor(r.ClaimID); !ok {
			rest = append(rest, r)
			continue
		}
		st, err := o.moveOf(ctx, r)
		if err != nil {
			return nil, counting.Plan{}, 0, err
		}
		at := counting.ExpiresAt(r, notBefore)
		switch {
		case st.counted:
			p.Fold = append(p.Fold, r.ClaimID)
		case !now.Before(at) && st.settled:
			p.Expire = append(p.Expire, r.ClaimID)
		case !now.Before(at):
			waiting++
		case p.Next.IsZero() || at.Before(p.Next):
			p.Next = at
		}
	}
	return rest, p, waiting, nil
}
