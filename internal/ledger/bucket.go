package ledger

import "slices"

// Bucket is the full persisted state of one bucket. Allocated, ByNamespace
// and Count are the observer's figures, stored as it wrote them: the ledger
// never adds to them itself. Reservations are the in-flight window, one entry
// per reservation id, and the reserved total is derived from them rather than
// stored, so an idempotent replay can never double count.
type Bucket struct {
	Key    BucketKey
	Limit  int64
	Grants []GrantContribution
	// Allocated is the observed usage: what the live objects counted against
	// this bucket amount to, as last written by Observe.
	Allocated int64
	// ByNamespace splits Allocated by the counted objects' namespace ("" for
	// cluster-scoped objects). Nil when nothing is counted.
	ByNamespace map[string]int64
	// Count is the number of counted objects.
	Count int64
	// Reservations hold the in-flight window, by reservation id.
	Reservations map[string]Reservation
}

// DeepCopy returns a copy sharing no mutable state with b. Reservation and
// GrantContribution hold only values, so copying the containers is enough,
// which keeps the copy cheap on the hot path.
func (b Bucket) DeepCopy() Bucket {
	out := b
	out.Grants = slices.Clone(b.Grants)
	out.ByNamespace = copyMap(b.ByNamespace)
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

// Reserved is the checked sum of all reservations, expired or not: a
// reservation holds quota until it is folded, expired or released, so every
// reader agrees on the numbers regardless of its own clock.
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
	reserved, err := b.Reserved()
	if err != nil {
		return Usage{}, err
	}
	used, err := Add(b.Allocated, reserved)
	if err != nil {
		return Usage{}, err
	}
	u := Usage{Limit: b.Limit, Allocated: b.Allocated, Reserved: reserved}
	if used < b.Limit {
		if u.Available, err = Sub(b.Limit, used); err != nil {
			return Usage{}, err
		}
	}
	return u, nil
}

// OverLimit reports whether the bucket holds more than its limit: allocated
// plus reserved above it (a lowered limit, or reservations of objects that
// were never counted). A sum that overflows is over.
func (b Bucket) OverLimit() bool {
	reserved, err := b.Reserved()
	if err != nil {
		return true
	}
	used, err := Add(b.Allocated, reserved)
	return err != nil || used > b.Limit
}

// holds reports whether the claim already has a reservation here; such a
// bucket counts as taken for that claim.
func (b Bucket) holds(claimID string) bool {
	_, ok := b.Reservations[claimID]
	return ok
}
