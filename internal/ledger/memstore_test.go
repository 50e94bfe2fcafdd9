package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

func TestMemoryStoreCopies(t *testing.T) {
	ctx := context.Background()
	s := ledger.NewMemoryStore()
	key := ledger.NewBucketKey(project("p"), rtProjects, nil)
	var leaked *ledger.Bucket
	got, err := s.Apply(ctx, key, func(b *ledger.Bucket) error {
		b.Limit = 5
		b.Grants = []ledger.GrantContribution{{GrantID: "g", Amount: 5}}
		b.ByNamespace = map[string]int64{"a": 1}
		b.Reservations = map[string]ledger.Reservation{"r": {ClaimID: "r", Amount: 2, ExpiresAt: t0}}
		leaked = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Scribbling over the returned bucket, a Get result, or what mutate was
	// given must not reach the stored state.
	got.ByNamespace["a"] = 100
	got.Grants[0].Amount = 100
	leaked.Reservations["x"] = ledger.Reservation{Amount: 100}
	leaked.ByNamespace["y"] = 100
	b, _, _ := s.Get(ctx, key)
	b.ByNamespace["z"] = 100
	b.Grants[0].Amount = 100
	b, ok, err := s.Get(ctx, key)
	if err != nil || !ok {
		t.Fatalf("Get: %v %v", ok, err)
	}
	want := ledger.Bucket{Key: key, Limit: 5, Grants: []ledger.GrantContribution{{GrantID: "g", Amount: 5}},
		ByNamespace: map[string]int64{"a": 1}, Reservations: map[string]ledger.Reservation{"r": {ClaimID: "r", Amount: 2, ExpiresAt: t0}}}
	if fmt.Sprint(b) != fmt.Sprint(want) {
		t.Fatalf("stored bucket changed through an alias:\n got %+v\nwant %+v", b, want)
	}
}

func TestMemoryStoreMutateErrorWritesNothing(t *testing.T) {
	ctx := context.Background()
	s := ledger.NewMemoryStore()
	key := ledger.NewBucketKey(project("p"), rtProjects, nil)
	boom := errors.New("boom")
	if _, err := s.Apply(ctx, key, func(b *ledger.Bucket) error { b.Limit = 9; return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if _, ok, _ := s.Get(ctx, key); ok {
		t.Fatal("failed Apply created the bucket")
	}
	if list, _ := s.List(ctx); len(list) != 0 {
		t.Fatalf("List = %+v", list)
	}
	_, _ = s.Apply(ctx, key, func(b *ledger.Bucket) error { b.Limit = 1; return nil })
	_, _ = s.Apply(ctx, key, func(b *ledger.Bucket) error { b.Limit = 2; return boom })
	if b, _, _ := s.Get(ctx, key); b.Limit != 1 {
		t.Fatalf("failed Apply changed limit to %d", b.Limit)
	}
	if _, err := s.Apply(ctx, key, func(b *ledger.Bucket) error { b.Key.ResourceType = "other"; return nil }); err == nil {
		t.Fatal("Apply accepted a changed key")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Apply(cancelled, key, func(*ledger.Bucket) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply on cancelled context: %v", err)
	}
}

func TestMemoryStoreListSortedByName(t *testing.T) {
	ctx := context.Background()
	s := ledger.NewMemoryStore()
	for i := range 50 {
		key := ledger.NewBucketKey(project(fmt.Sprint(i)), rtProjects, nil)
		_, _ = s.Apply(ctx, key, func(b *ledger.Bucket) error { b.Limit = int64(i); return nil })
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 50 {
		t.Fatalf("List: %d %v", len(list), err)
	}
	if !slices.IsSortedFunc(list, func(a, b ledger.Bucket) int { return strings.Compare(a.Key.Name(), b.Key.Name()) }) {
		t.Fatal("List not sorted by Name")
	}
}

// Writers to one bucket are serialized: no lost update.
func TestMemoryStoreApplyAtomic(t *testing.T) {
	ctx := context.Background()
	s := ledger.NewMemoryStore()
	keys := []ledger.BucketKey{ledger.NewBucketKey(project("a"), rtProjects, nil), ledger.NewBucketKey(project("b"), rtProjects, nil)}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			for range 100 {
				_, _ = s.Apply(ctx, keys[i%2], func(b *ledger.Bucket) error {
					b.Limit++
					if b.ByNamespace == nil {
						b.ByNamespace = map[string]int64{}
					}
					b.ByNamespace[fmt.Sprint(i)]++
					time.Sleep(0) // widen the window a lost update would need
					return nil
				})
			}
		})
	}
	wg.Wait()
	for _, k := range keys {
		if b, _, _ := s.Get(ctx, k); b.Limit != 1600 || len(b.ByNamespace) != 16 {
			t.Fatalf("bucket %s: limit %d with %d namespaces, want 1600 and 16", k, b.Limit, len(b.ByNamespace))
		}
	}
}

// AnyOverLimit: allocated plus reserved above the limit, per resource type;
// a store that cannot tell makes the ledger answer yes.
func TestAnyOverLimit(t *testing.T) {
	ctx := context.Background()
	s := ledger.NewMemoryStore()
	over := func(rt string) bool {
		t.Helper()
		got, err := s.AnyOverLimit(ctx, rt)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if over(rtProjects) {
		t.Fatal("no buckets: over")
	}
	key := ledger.NewBucketKey(project("p"), rtProjects, nil)
	set := func(limit, allocated, reserved int64) {
		t.Helper()
		if _, err := s.Apply(ctx, key, func(b *ledger.Bucket) error {
			b.Limit, b.Allocated = limit, allocated
			b.Reservations = map[string]ledger.Reservation{"r": {ClaimID: "r", Amount: reserved, ExpiresAt: t0}}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	set(5, 3, 2)
	if over(rtProjects) {
		t.Fatal("allocated 3 + reserved 2 of 5: over")
	}
	set(5, 3, 3)
	if !over(rtProjects) {
		t.Fatal("allocated 3 + reserved 3 of 5: not over")
	}
	if over(rtProjects + "-other") {
		t.Fatal("another resource type: over")
	}

	withFinder, err := ledger.New(s, ledger.NewGrantSet()).AnyOverLimit(ctx, rtProjects+"-other")
	if err != nil || withFinder {
		t.Fatalf("ledger over a memory store: %v, %v", withFinder, err)
	}
	blind := ledger.New(struct{ ledger.Store }{s}, ledger.NewGrantSet())
	if got, err := blind.AnyOverLimit(ctx, rtProjects+"-other"); err != nil || !got {
		t.Fatalf("ledger over a store without OverLimitFinder: %v, %v (want true)", got, err)
	}
}
