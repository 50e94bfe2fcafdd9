package ledger

import "slices"

// Bucket is the full persisted state of one bucket. Allocated and reserved
// totals are derived from the per-claim entries rather than stored, so that
// the entries are the single source of truth and an idempotent replay can
// never double count.
type Bucket struct {
	Key          BucketKey
	Limit        int64
	Grants       []GrantContribution
	Allocations  map[string]int64       // claim id -> amount
	Reservations map[string]Reservation // claim id -> reservation
}

// DeepCopy returns a copy sharing no mutable state with b. Reservation and
// GrantContribution hold only values, so copying the containers is enough,
// which keeps the copy cheap on the hot path.
func (b Bucket) DeepCopy() Bucket {
	out := b
	out.Grants = slices.Clone(b.Grants)
	out.Allocations = copyMap(b.Allocations)
	out.Reservations = copyMap(b.Reservations)
	return out
}

// copyMap sizes the copy by the live entries. maps.Clone would keep the
// source's table size, which for a bucket whose entries come and go is
// mostly empty space, copied on every write.
func copyMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Allocated is the checked sum of all allocations.
func (b Bucket) Allocated() (int64, error) {
	var sum int64
	for _, amount := range b.Allocations {
		var err error
		if sum, err = Add(sum, amount); err != nil {
			return 0, err
		}
	}
	return sum, nil
}

// Reserved is the checked sum of all reservations, expired or not: a
// reservation holds quota until it is released, so every reader agrees on
// the numbers regardless of its own clock.
func (b Bucket) Reserved() (int64, error) {
	var sum int64
	for _, r := range b.Reservations {
		var err error
		if sum, err = Add(sum, r.Amount); err != nil {
			return 0, err
		}
	}
	return sum, nil
}

// Usage returns all the numbers at once with checked arithmetic.
func (b Bucket) Usage() (Usage, error) {
	allocated, err := b.Allocated()
	if err != nil {
		return Usage{}, err
	}
	reserved, err := b.Reserved()
	if err != nil {
		return Usage{}, err
	}
	used, err := Add(allocated, reserved)
	if err != nil {
		return Usage{}, err
	}
	u := Usage{Limit: b.Limit, Allocated: allocated, Reserved: reserved}
	if used < b.Limit {
		if u.Available, err = Sub(b.Limit, used); err != nil {
			return Usage{}, err
		}
	}
	return u, nil
}

// holds reports whether the claim already has an entry here; such a bucket
// counts as taken for that claim.
func (b Bucket) holds(claimID string) bool {
	if _, ok := b.Allocations[claimID]; ok {
		return true
	}
	_, ok := b.Reservations[claimID]
	return ok
}
