package ledger

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
)

// GrantSource answers which grants a consumer has for a resource type. The
// ledger asks it on every write instead of trusting a bucket's stored limit,
// so a limit can never be stale for longer than one write. The Kubernetes side
// backs it with an informer cache.
type GrantSource interface {
	GrantsFor(c Consumer, resourceType string) []Grant
}

// GrantID is the ID convention for the Grant values made from one
// ResourceGrant object: "namespace/name#index", index being the position of
// the bucket amount in the object. IDs must be unique across the GrantSource.
func GrantID(namespace, name string, index int) string {
	return fmt.Sprintf("%s/%s#%d", namespace, name, index)
}

type grantIndex struct {
	consumer     Consumer
	resourceType string
}

// GrantSet is a concurrency-safe in-memory GrantSource.
type GrantSet struct {
	mu    sync.RWMutex
	byID  map[string]Grant
	index map[grantIndex]map[string]struct{}
}

// NewGrantSet returns an empty GrantSet.
func NewGrantSet() *GrantSet {
	return &GrantSet{byID: map[string]Grant{}, index: map[grantIndex]map[string]struct{}{}}
}

// Set adds or replaces grants by ID. All grants are validated first; on error
// none is stored.
func (s *GrantSet) Set(grants ...Grant) error {
	var errs []FieldError
	for i, g := range grants {
		errs = append(errs, validateGrant(fmt.Sprintf("grants[%d]", i), g)...)
	}
	if len(errs) > 0 {
		return &ValidationError{Errors: errs}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range grants {
		s.deleteLocked(g.ID)
		s.byID[g.ID] = g
		idx := grantIndex{g.Consumer, g.ResourceType}
		if s.index[idx] == nil {
			s.index[idx] = map[string]struct{}{}
		}
		s.index[idx][g.ID] = struct{}{}
	}
	return nil
}

// Delete removes grants by ID; unknown IDs are ignored.
func (s *GrantSet) Delete(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.deleteLocked(id)
	}
}

func (s *GrantSet) deleteLocked(id string) {
	old, ok := s.byID[id]
	if !ok {
		return
	}
	delete(s.byID, id)
	idx := grantIndex{old.Consumer, old.ResourceType}
	delete(s.index[idx], id)
	if len(s.index[idx]) == 0 {
		delete(s.index, idx)
	}
}

// GrantsFor returns the consumer's grants for the resource type, sorted by ID.
func (s *GrantSet) GrantsFor(c Consumer, resourceType string) []Grant {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := s.index[grantIndex{c, resourceType}]
	out := make([]Grant, 0, len(ids))
	for id := range ids {
		out = append(out, s.byID[id])
	}
	slices.SortFunc(out, func(a, b Grant) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func validateGrant(path string, g Grant) []FieldError {
	var errs []FieldError
	if g.ID == "" {
		errs = append(errs, FieldError{Field: path + ".id", Detail: "must not be empty"})
	}
	if g.Amount < 0 {
		errs = append(errs, FieldError{Field: path + ".amount", Detail: fmt.Sprintf("must not be negative, got %d", g.Amount)})
	}
	if g.ResourceType == "" {
		errs = append(errs, FieldError{Field: path + ".resourceType", Detail: "must not be empty"})
	}
	errs = append(errs, validateConsumer(path+".consumer", g.Consumer)...)
	return errs
}

// limitFor computes a bucket's limit and contributions from the current
// grants. Grants are additive: every matching grant adds its amount. The
// source is re-checked for consumer and resource type so that a loosely
// filtered informer-backed source cannot inflate a limit.
func limitFor(src GrantSource, key BucketKey) (int64, []GrantContribution, error) {
	grants := src.GrantsFor(key.Consumer, key.ResourceType)
	if len(grants) == 0 {
		return 0, nil, nil
	}
	dims := key.DimensionSet()
	var limit int64
	var contribs []GrantContribution
	for _, g := range grants {
		if g.Consumer != key.Consumer || g.ResourceType != key.ResourceType {
			continue
		}
		if g.Selector != nil && !g.Selector.Matches(labels.Set(dims)) {
			continue
		}
		if g.Amount < 0 {
			return 0, nil, fmt.Errorf("grant %s: amount must not be negative, got %d", g.ID, g.Amount)
		}
		var err error
		if limit, err = Add(limit, g.Amount); err != nil {
			return 0, nil, fmt.Errorf("limit of bucket %s from grant %s: %w", key.Name(), g.ID, err)
		}
		contribs = append(contribs, GrantContribution{GrantID: g.ID, Amount: g.Amount, Generation: g.Generation})
	}
	slices.SortFunc(contribs, func(a, b GrantContribution) int { return strings.Compare(a.GrantID, b.GrantID) })
	return limit, contribs, nil
}
