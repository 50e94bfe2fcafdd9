package observer

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/quotakeeper/quotakeeper/ledger"
)

// Object is what the observer knows of one live object: who it is, at which
// generation it was evaluated, and what it counts against each bucket.
type Object struct {
	UID        string
	Generation int64
	Namespace  string // "" for cluster-scoped objects
	// Amounts is what the object counts against each bucket; empty when it
	// counts nothing (no deny constraint asks anything of it).
	Amounts map[ledger.BucketKey]int64
}

// member is one counted object's part of one bucket.
type member struct {
	generation int64
	namespace  string
	amount     int64
}

// Tally holds every evaluated object and, per bucket, the objects it
// counts. It is the observer's whole state about usage; the ledger's
// figures are derived from it (Observation). Not safe for concurrent use.
type Tally struct {
	// objects by a key naming the object (kind, namespace, name), so that a
	// delete, which may come without the object, finds what it counted.
	objects map[string]Object
	// seen is the evaluated generation of every object by uid.
	seen map[string]int64
	// buckets: bucket -> uid -> the object's part.
	buckets map[ledger.BucketKey]map[string]member
}

// NewTally returns an empty tally.
func NewTally() *Tally {
	return &Tally{objects: map[string]Object{}, seen: map[string]int64{}, buckets: map[ledger.BucketKey]map[string]member{}}
}

// Set records what the object under ref counts now, replacing what it
// counted before, and returns the buckets whose figures changed.
func (t *Tally) Set(ref string, o Object) []ledger.BucketKey {
	old, had := t.objects[ref]
	changed := map[ledger.BucketKey]bool{}
	if had {
		t.drop(old, o, changed)
	}
	t.objects[ref] = o
	t.seen[o.UID] = o.Generation
	for key, amount := range o.Amounts {
		if amount <= 0 {
			continue
		}
		m := member{generation: o.Generation, namespace: o.Namespace, amount: amount}
		members := t.buckets[key]
		if members == nil {
			members = map[string]member{}
			t.buckets[key] = members
		}
		if have, ok := members[o.UID]; !ok || have != m {
			members[o.UID] = m
			changed[key] = true
		}
	}
	return sortedKeys(changed)
}

// Remove forgets the object under ref and returns the buckets it counted in.
func (t *Tally) Remove(ref string) []ledger.BucketKey {
	old, had := t.objects[ref]
	if !had {
		return nil
	}
	changed := map[ledger.BucketKey]bool{}
	t.drop(old, Object{}, changed)
	delete(t.objects, ref)
	if t.seen[old.UID] == old.Generation {
		delete(t.seen, old.UID)
	}
	return sortedKeys(changed)
}

// drop removes old's parts from the buckets next no longer counts it in.
func (t *Tally) drop(old, next Object, changed map[ledger.BucketKey]bool) {
	for key := range old.Amounts {
		if next.UID == old.UID && next.Amounts[key] > 0 {
			continue // Set overwrites it
		}
		members := t.buckets[key]
		if _, ok := members[old.UID]; !ok {
			continue
		}
		delete(members, old.UID)
		changed[key] = true
		if len(members) == 0 {
			delete(t.buckets, key)
		}
	}
}

// Refs returns the keys of every object the tally holds.
func (t *Tally) Refs() []string { return slices.Sorted(maps.Keys(t.objects)) }

// Buckets returns every bucket some object counts in.
func (t *Tally) Buckets() []ledger.BucketKey {
	return slices.SortedFunc(maps.Keys(t.buckets), compareKeys)
}

// Counted reports at which generation the object uid is counted in key.
func (t *Tally) Counted(key ledger.BucketKey, uid string) (generation int64, ok bool) {
	m, ok := t.buckets[key][uid]
	return m.generation, ok
}

// Seen reports at which generation the object uid was last evaluated.
func (t *Tally) Seen(uid string) (generation int64, ok bool) {
	g, ok := t.seen[uid]
	return g, ok
}

// Observation returns the bucket's figures (Fold and Expire left empty), with
// checked sums, and the objects they count (Counted).
func (t *Tally) Observation(key ledger.BucketKey) (ledger.Observation, error) {
	members := t.buckets[key]
	obs := ledger.Observation{Count: int64(len(members))}
	if len(members) == 0 {
		return obs, nil
	}
	obs.ByNamespace = map[string]int64{}
	obs.Counted = make(map[string]int64, len(members))
	// In any order: every amount is positive, so the sums and their
	// overflow check do not depend on it, and sorting 100,000 uids on every
	// write was a tenth of the manager's CPU while it counted them.
	for uid, m := range members {
		obs.Counted[uid] = m.generation
		var err error
		if obs.Allocated, err = ledger.Add(obs.Allocated, m.amount); err != nil {
			return ledger.Observation{}, fmt.Errorf("bucket %s: %w", key.Name(), err)
		}
		// Never overflows when the total did not: every part is positive.
		obs.ByNamespace[m.namespace] += m.amount
	}
	return obs, nil
}

func sortedKeys(set map[ledger.BucketKey]bool) []ledger.BucketKey {
	return slices.SortedFunc(maps.Keys(set), compareKeys)
}

func compareKeys(a, b ledger.BucketKey) int { return cmp.Compare(a.String(), b.String()) }
