package ledger

import (
	"context"
	"fmt"
	"sync"
)

// MemoryStore is an in-memory Store. Each bucket has its own mutex, reached
// through a sync.Map, so writers to different buckets never share a lock;
// buckets are deep-copied in and out so no caller can alias stored state.
type MemoryStore struct {
	buckets sync.Map // BucketKey -> *memEntry
}

type memEntry struct {
	mu     sync.Mutex
	bucket Bucket
	exists bool // false until the first successful Apply
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

func (s *MemoryStore) entry(key BucketKey) *memEntry {
	if e, ok := s.buckets.Load(key); ok {
		return e.(*memEntry)
	}
	e, _ := s.buckets.LoadOrStore(key, &memEntry{})
	return e.(*memEntry)
}

// Apply runs mutate under the bucket's lock, so it never conflicts and mutate
// runs exactly once.
func (s *MemoryStore) Apply(ctx context.Context, key BucketKey, mutate func(*Bucket) error) (Bucket, error) {
	if err := ctx.Err(); err != nil {
		return Bucket{}, err
	}
	e := s.entry(key)
	e.mu.Lock()
	defer e.mu.Unlock()
	work := Bucket{Key: key}
	if e.exists {
		work = e.bucket.DeepCopy()
	}
	if err := mutate(&work); err != nil {
		return Bucket{}, err
	}
	if work.Key != key {
		return Bucket{}, fmt.Errorf("mutate changed the key of bucket %s", key.Name())
	}
	e.bucket, e.exists = work.DeepCopy(), true
	return work, nil
}

// Get returns a copy of the bucket.
func (s *MemoryStore) Get(ctx context.Context, key BucketKey) (Bucket, bool, error) {
	if err := ctx.Err(); err != nil {
		return Bucket{}, false, err
	}
	v, ok := s.buckets.Load(key)
	if !ok {
		return Bucket{}, false, nil
	}
	e := v.(*memEntry)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.exists {
		return Bucket{}, false, nil
	}
	return e.bucket.DeepCopy(), true, nil
}

// AnyOverLimit implements OverLimitFinder by looking at every bucket.
func (s *MemoryStore) AnyOverLimit(ctx context.Context, resourceType string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	over := false
	s.buckets.Range(func(k, v any) bool {
		if k.(BucketKey).ResourceType != resourceType {
			return true
		}
		e := v.(*memEntry)
		e.mu.Lock()
		over = e.exists && e.bucket.OverLimit()
		e.mu.Unlock()
		return !over
	})
	return over, nil
}
