package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Observation is what the observer saw for one bucket.
type Observation struct {
	// Allocated is the sum, over the live objects counted in the bucket, of
	// what each counts against it.
	Allocated int64
	// ByNamespace splits Allocated by the counted objects' namespace ("" for
	// cluster-scoped objects): values >= 0, summing to Allocated (checked).
	ByNamespace map[string]int64
	// Count is the number of counted objects.
	Count int64
	// Fold lists reservation ids now counted in Allocated: removed in this
	// write, so the same object is never counted twice.
	Fold []string
	// Counted is the generation at which each object counted in Allocated
	// was counted, and its amount here, by uid. The write also folds every
	// reservation of the stored bucket that one of them accounts for
	// (Reservation.FoldedBy), Fold or not: the
	// observer plans Fold from its cached copy of the bucket, which can lag
	// (after an apiserver restart its informers re-list apart), and a
	// reservation it did not see must not stay beside the object it counts.
	Counted map[string]CountedAt
	// Expire lists reservation ids that expired with no object: removed in
	// this write.
	Expire []string
}

// Observe sets the observed figures, removes the listed reservations (absent
// ids are ignored), recomputes the limit from the grants, in one atomic
// write; writes nothing when nothing changes. Invalid observations (negative,
// split not summing) are a *ValidationError and write nothing, as is one
// whose allocated plus the remaining reservations would overflow. When the
// grants give no computable limit (their sum overflows), the bucket keeps
// the limit it has and the rest is written all the same: folding and
// expiring never wait on the grants (Reserve refuses such a bucket).
//
// Setting the sums and folding the reservations they now include in the
// same write is what keeps the window closed: a reader sees either the
// reservation or the counted object, never both and never neither. Only the
// ids the observer names are removed, never "everything it does not count",
// so a reservation made after it looked survives.
func (l *Ledger) Observe(ctx context.Context, key BucketKey, obs Observation) (Bucket, error) {
	if err := validateObservation(obs); err != nil {
		return Bucket{}, err
	}
	limit, contribs, limitErr := limitFor(l.grants, key)
	var byNamespace map[string]int64
	if len(obs.ByNamespace) > 0 {
		byNamespace = maps.Clone(obs.ByNamespace)
	}
	var current Bucket
	b, err := l.store.Apply(ctx, key, func(b *Bucket) error {
		limit, contribs := limit, contribs
		if limitErr != nil {
			limit, contribs = b.Limit, b.Grants
		}
		changed := b.Limit != limit || !slices.Equal(b.Grants, contribs) ||
			b.Allocated != obs.Allocated || b.Count != obs.Count || !maps.Equal(b.ByNamespace, byNamespace)
		var remove []string
		for _, ids := range [][]string{obs.Fold, obs.Expire} {
			for _, id := range ids {
				if b.holds(id) {
					remove = append(remove, id)
				}
			}
		}
		for _, id := range slices.Sorted(maps.Keys(b.Reservations)) {
			uid, _, _ := ReservationFor(id)
			if counted, ok := obs.Counted[uid]; ok && b.Reservations[id].FoldedBy(counted) && !slices.Contains(remove, id) {
				remove = append(remove, id)
			}
		}
		if !changed && len(remove) == 0 {
			current = b.DeepCopy()
			return errUnchanged
		}
		// Build the result apart from b and check it before touching b, so
		// a failing mutate leaves b as it was given.
		next := b.DeepCopy()
		for _, id := range remove {
			delete(next.Reservations, id)
		}
		next.Limit, next.Grants = limit, slices.Clone(contribs)
		next.Allocated, next.Count, next.ByNamespace = obs.Allocated, obs.Count, copyMap(byNamespace)
		if _, err := next.Usage(); err != nil {
			return fmt.Errorf("observe bucket %s: %w", key.Name(), err)
		}
		*b = next
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return current, nil
	}
	return b, err
}

func validateObservation(obs Observation) error {
	var errs []FieldError
	if obs.Allocated < 0 {
		errs = append(errs, FieldError{Field: "allocated", Detail: fmt.Sprintf("must not be negative, got %d", obs.Allocated)})
	}
	if obs.Count < 0 {
		errs = append(errs, FieldError{Field: "count", Detail: fmt.Sprintf("must not be negative, got %d", obs.Count)})
	}
	var sum int64
	var sumErr error
	// Sorted so the error text is deterministic.
	for _, ns := range slices.Sorted(maps.Keys(obs.ByNamespace)) {
		v := obs.ByNamespace[ns]
		if v < 0 {
			errs = append(errs, FieldError{Field: fmt.Sprintf("byNamespace[%s]", ns), Detail: fmt.Sprintf("must not be negative, got %d", v)})
			continue
		}
		if sumErr == nil {
			sum, sumErr = Add(sum, v)
		}
	}
	switch {
	case sumErr != nil:
		errs = append(errs, FieldError{Field: "byNamespace", Detail: fmt.Sprintf("sum: %v", sumErr), Err: sumErr})
	case len(errs) == 0 && sum != obs.Allocated:
		errs = append(errs, FieldError{Field: "byNamespace", Detail: fmt.Sprintf("sums to %d, want allocated %d", sum, obs.Allocated)})
	}
	if len(errs) > 0 {
		return &ValidationError{Errors: errs}
	}
	return nil
}

// ReservationFor says which object, at which generation, a reservation id
// stands for: admission reserves a create under the object's uid and the
// growth of an update under "<uid>/<generation>/<growth>" (rego/lib/quota.rego).
// An observer folds a reservation once it has evaluated that object at that
// generation or later; update is false for a create's id, whose generation
// is 0. An id of another shape names the whole id as uid, so it is never
// folded by a generation it does not carry.
func ReservationFor(id string) (uid string, generation int64, update bool) {
	uid, rest, update := strings.Cut(id, "/")
	if !update {
		return id, 0, false
	}
	g, _, _ := strings.Cut(rest, "/")
	n, err := strconv.ParseInt(g, 10, 64)
	if err != nil {
		return id, 0, false
	}
	return uid, n, true
}

// Created is an object whose create reservation an observer still finds in a
// bucket, evaluated: its uid (the reservation's id), generation, namespace
// ("" if cluster-scoped) and what it counts in the bucket.
type Created struct {
	UID        string
	Generation int64
	Namespace  string
	Amount     int64
}

// FoldCreated is what an observer that has not counted every object yet (a
// restart's rebuild) can still write, so that a bucket does not gather
// reservations for as long as the rebuild lasts: each object in created
// whose create reservation the bucket holds is added to the figures as last
// written (allocated, its namespace's part, count) and the reservation
// removed, in one write; ids in expire are removed. It leaves the limit
// as stored (the grants the caller sees may not be synced yet).
//
// Adding is exact because a create reservation's presence proves its
// object is not in allocated: Observe removes it in the very write whose
// allocated first counts the object (Counted, FoldedBy), and a create's id
// is its object's uid, which no other request reserves under. An update's
// growth ("<uid>/<generation>/<growth>") proves no such thing (the object
// is in allocated at some older amount) and is left for Observe; so is a
// created object counted below what was reserved for it (FoldedBy).
func (l *Ledger) FoldCreated(ctx context.Context, key BucketKey, created []Created, expire []string) (Bucket, error) {
	for i, c := range created {
		if c.Amount < 0 {
			return Bucket{}, &ValidationError{Errors: []FieldError{{Field: fmt.Sprintf("created[%d].amount", i), Detail: fmt.Sprintf("must not be negative, got %d", c.Amount)}}}
		}
	}
	var current Bucket
	b, err := l.store.Apply(ctx, key, func(b *Bucket) error {
		next := b.DeepCopy()
		changed := false
		for _, c := range created {
			r, ok := next.Reservations[c.UID]
			if _, _, update := ReservationFor(c.UID); !ok || update || !r.FoldedBy(CountedAt{Generation: c.Generation, Amount: c.Amount}) {
				continue
			}
			allocated, err := Add(next.Allocated, c.Amount)
			if err != nil {
				return fmt.Errorf("fold created objects into bucket %s: allocated: %w", key.Name(), err)
			}
			next.Allocated, next.Count = allocated, next.Count+1
			if c.Amount > 0 {
				if next.ByNamespace == nil {
					next.ByNamespace = map[string]int64{}
				}
				next.ByNamespace[c.Namespace] += c.Amount
			}
			delete(next.Reservations, c.UID)
			changed = true
		}
		for _, id := range expire {
			if next.holds(id) {
				delete(next.Reservations, id)
				changed = true
			}
		}
		if !changed {
			current = b.DeepCopy()
			return errUnchanged
		}
		if _, err := next.Usage(); err != nil {
			return fmt.Errorf("fold created objects into bucket %s: %w", key.Name(), err)
		}
		*b = next
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return current, nil
	}
	return b, err
}
