package ledger

import (
	"context"
	"errors"
)

// Store persists buckets. It is deliberately per-bucket: one atomic
// read-modify-write of one bucket is exactly what a Kubernetes object with
// resourceVersion compare-and-swap offers, and what a group-committing writer
// can batch. Everything that spans buckets (all-or-nothing, rollback, ordering)
// lives in the Ledger, so every Store implementation gets it for free.
type Store interface {
	// Apply reads the bucket (a zero Bucket with that key if absent), calls
	// mutate on a private copy, and persists the result atomically. mutate may
	// run more than once (on write conflict) and must be a pure function of
	// the bucket it is given. If mutate returns an error, nothing is written
	// for that call and the error is returned. Returns the bucket as
	// persisted. When ctx ends first Apply returns at once: with an error
	// wrapping ErrOutcomeUnknown if the mutation may still be persisted
	// (the caller undoes it with a later Apply, which a store orders after
	// it), with any other error if it never will be.
	Apply(ctx context.Context, key BucketKey, mutate func(*Bucket) error) (Bucket, error)
	// Get returns the bucket and whether it exists.
	Get(ctx context.Context, key BucketKey) (Bucket, bool, error)
}

// ErrOutcomeUnknown is wrapped by a Store's error when the caller stopped
// waiting (its context ended) while its mutation was being written: it may
// or may not have been persisted.
var ErrOutcomeUnknown = errors.New("outcome unknown: the caller stopped waiting while the write was in flight")

// OverLimitFinder is a Store that can say cheaply whether any of its buckets
// of a resource type is over its limit (Bucket.OverLimit). Gatekeeper's
// audit reviews every object; it asks this first, so that a cluster with no
// bucket over its limit does not work out every object's buckets only to
// find each one within it.
type OverLimitFinder interface {
	AnyOverLimit(ctx context.Context, resourceType string) (bool, error)
}
