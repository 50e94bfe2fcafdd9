package ledger_test

import (
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// newCompactingFixture is a fixture whose ledger compacts above n.
func newCompactingFixture(t testing.TB, n int) *fixture {
	f := newFixture(t)
	f.ledger = ledger.New(f.store, f.grants, ledger.WithClock(f.clock.Now), ledger.WithCompactAbove(n))
	return f
}

func bucket(t testing.TB, f *fixture, key ledger.BucketKey) ledger.Bucket {
	t.Helper()
	b, ok, err := f.store.Get(f.ctx, key)
	if err != nil || !ok {
		t.Fatalf("get %s: %v (exists %v)", key, err, ok)
	}
	return b
}

// sums splits a bucket's reservations into its sums (ids) and the creates
// they hold plus the creates it holds apart.
func sums(b ledger.Bucket) (ids []string, creates int64) {
	for id, r := range b.Reservations {
		if ledger.IsSum(id) {
			ids = append(ids, id)
			creates += ledger.SumCount(r)
			continue
		}
		creates++
	}
	return ids, creates
}

func TestCompactable(t *testing.T) {
	at := t0.Add(time.Minute)
	thing := ledger.ObjectRef{APIGroup: "example.com", Kind: "Thing", Name: "x", UID: "u"}
	for _, tc := range []struct {
		name string
		r    ledger.Reservation
		want bool
	}{
		{"an admission create", ledger.Reservation{ClaimID: "u", Object: thing, ExpiresAt: at}, true},
		{"a core object's create", ledger.Reservation{ClaimID: "u", Object: ledger.ObjectRef{Kind: "ConfigMap", Name: "x"}, ExpiresAt: at}, true},
		{"an update's growth", ledger.Reservation{ClaimID: "u/3/2", Object: thing, ExpiresAt: at}, false},
		{"a namespace move", ledger.Reservation{ClaimID: ledger.NamespaceMoveID("n", map[string]string{"a": "b"}), Object: thing, ExpiresAt: at}, false},
		{"a sum", ledger.Reservation{ClaimID: "sum/3", Object: ledger.SumObject(2), ExpiresAt: at}, false},
		{"an Allocation claim", ledger.Reservation{ClaimID: "c", Object: ledger.ObjectRef{APIGroup: "quota.miloapis.com", Kind: "ResourceClaim", Name: "c"}, ExpiresAt: at}, false},
		{"a delegated grant's hand-out", ledger.Reservation{ClaimID: "g", Object: ledger.ObjectRef{APIGroup: "quota.miloapis.com", Kind: "ResourceGrant", Name: "g"}, ExpiresAt: at}, false},
		{"no expiry", ledger.Reservation{ClaimID: "u", Object: thing}, false},
	} {
		if got := ledger.Compactable(tc.r); got != tc.want {
			t.Errorf("%s: Compactable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestIsSum(t *testing.T) {
	for id, want := range map[string]bool{"sum/3": true, "sum/": true, "sum": false, "u/sum/3": false, "summer": false} {
		if got := ledger.IsSum(id); got != want {
			t.Errorf("IsSum(%q) = %v, want %v", id, got, want)
		}
	}
}

// 20,000 creates with nobody folding: compaction starts at the first create
// past the threshold, the bucket never holds more than CompactAbove
// reservations and MaxSums sums, reserved is exactly what was granted, and
// the sums with the creates held apart account for every create.
func TestCompactionKeepsTheBucketBounded(t *testing.T) {
	const above, creates = 50, 20000
	f := newCompactingFixture(t, above)
	f.grant(t, "quota/g#0", project("p"), rtProjects, 1<<40, nil)
	key := ledger.NewBucketKey(project("p"), rtProjects, nil)
	r := rand.New(rand.NewSource(1))
	var granted int64
	for i := range creates {
		f.clock.now = t0.Add(time.Duration(i) * time.Millisecond)
		amount := 1 + r.Int63n(5)
		mustReserve(t, f, claim(fmt.Sprintf("c%d", i), req(project("p"), rtProjects, amount, nil)))
		granted += amount
		b := bucket(t, f, key)
		ids, held := sums(b)
		switch {
		case i+1 <= above && len(ids) != 0:
			t.Fatalf("create %d: compacted at or below the threshold: %v", i+1, ids)
		case i+1 == above+1 && (len(ids) != 1 || len(b.Reservations) != above/2+1):
			t.Fatalf("create %d: %d reservations, sums %v; want %d creates and one sum", i+1, len(b.Reservations), ids, above/2)
		case len(b.Reservations) > above+ledger.MaxSums || len(ids) > ledger.MaxSums:
			t.Fatalf("create %d: %d reservations, %d sums: not bounded", i+1, len(b.Reservations), len(ids))
		case held != int64(i+1):
			t.Fatalf("create %d: the bucket accounts for %d creates", i+1, held)
		}
		if u := f.usage(t, key); u.Reserved != granted {
			t.Fatalf("create %d: reserved %d, granted %d", i+1, u.Reserved, granted)
		}
		// The creates still held apart are the latest ones (sampled: the
		// -race run stays short).
		if i+1 > above && i%97 == 0 {
			for id := range b.Reservations {
				var n int
				if _, err := fmt.Sscanf(id, "c%d", &n); err == nil && n < i+1-above {
					t.Fatalf("create %d: c%d is held apart, older than the last %d", i+1, n, above)
				}
			}
		}
	}
}

// Many replicas' worth of goroutines reserve creates at once in a bucket
// that compacts every few writes: the limit stays exact.
func TestCompactionKeepsTheLimitExact(t *testing.T) {
	const limit, workers = 3000, 16
	f := newCompactingFixture(t, 8)
	f.grant(t, "quota/g#0", project("p"), rtProjects, limit, nil)
	key := ledger.NewBucketKey(project("p"), rtProjects, nil)
	var granted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewSource(int64(w)))
			for i, refusals := 0, 0; refusals < 20; i++ {
				amount := 1 + r.Int63n(7)
				d, err := f.ledger.Reserve(f.ctx, claim(fmt.Sprintf("w%d-%d", w, i), req(project("p"), rtProjects, amount, nil)))
				if err != nil {
					t.Errorf("reserve: %v", err)
					return
				}
				if d.Granted {
					granted.Add(amount)
					continue
				}
				refusals++
				if rd := d.Requests[0]; rd.Reason != ledger.ReasonQuotaExceeded || rd.Available >= amount {
					t.Errorf("refused %d with %+v: want QuotaExceeded with less than it available", amount, rd)
				}
			}
		})
	}
	wg.Wait()
	u := f.usage(t, key)
	if u.Reserved != granted.Load() || u.Reserved > limit {
		t.Fatalf("reserved %d, granted %d, limit %d", u.Reserved, granted.Load(), limit)
	}
	if ids, _ := sums(bucket(t, f, key)); len(ids) == 0 {
		t.Fatal("nothing compacted: the test proves nothing")
	}
	// What is left is refused with the usual error, and what fits is not.
	d := mustReserve(t, f, claim("last", req(project("p"), rtProjects, u.Available+1, nil)))
	if d.Granted || d.Requests[0].Reason != ledger.ReasonQuotaExceeded {
		t.Fatalf("reserving %d with %d available: %+v", u.Available+1, u.Available, d)
	}
	if u.Available > 0 {
		if d := mustReserve(t, f, claim("fits", req(project("p"), rtProjects, u.Available, nil))); !d.Granted {
			t.Fatalf("reserving the %d available refused: %+v", u.Available, d)
		}
	}
}

// compactedBucket makes a bucket holding one sum (of c0..c2, 2 each) and
// the creates c3 and c4, with CompactAbove 4.
func compactedBucket(t *testing.T) (*fixture, ledger.BucketKey, string) {
	t.Helper()
	f := newCompactingFixture(t, 4)
	f.grant(t, "quota/g#0", project("p"), rtProjects, 100, nil)
	key := ledger.NewBucketKey(project("p"), rtProjects, nil)
	for i := range 5 {
		f.clock.now = t0.Add(time.Duration(i) * time.Second)
		mustReserve(t, f, claim(fmt.Sprintf("c%d", i), req(project("p"), rtProjects, 2, nil)))
	}
	ids, _ := sums(bucket(t, f, key))
	if len(ids) != 1 {
		t.Fatalf("sums %v, want one", ids)
	}
	f.wantUsage(t, key, ledger.Usage{Limit: 100, Reserved: 10, Available: 90})
	return f, key, ids[0]
}

func TestASumIsNeverFoldedByAnObject(t *testing.T) {
	f, key, id := compactedBucket(t)
	s := bucket(t, f, key).Reservations[id]
	if ledger.SumCount(s) != 3 || s.Amount != 6 || s.Total != 0 || !s.ExpiresAt.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("sum %+v, want 3 creates of 6 written at the last create", s)
	}
	uid, g, _ := ledger.ReservationFor(id) // "sum" at a generation: never a fold
	b := mustObserve(t, f, key, ledger.Observation{
		Allocated: 4, Count: 2, ByNamespace: map[string]int64{"ns": 4},
		Counted: map[string]ledger.CountedAt{uid: {Generation: g + 1, Amount: 100}, id: {Generation: g + 1, Amount: 100}, "c3": {Amount: 2}},
		Expire:  []string{"c4"},
	})
	if _, ok := b.Reservations[id]; !ok || len(b.Reservations) != 1 {
		t.Fatalf("after the observation %v, want the sum alone", b.Reservations)
	}
	if s.FoldedBy(ledger.CountedAt{Generation: g, Amount: s.Amount}) {
		t.Fatal("a sum is FoldedBy an object")
	}
	// FoldCreated proves nothing about a sum either.
	b, err := f.ledger.FoldCreated(f.ctx, key, []ledger.Created{{UID: id, Generation: g, Amount: 2}, {UID: uid, Amount: 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Reservations[id]; !ok || b.Allocated != 4 {
		t.Fatalf("FoldCreated took the sum: %+v", b)
	}
	// Named in Fold, as the observer frees it behind its barrier: removed.
	b = mustObserve(t, f, key, ledger.Observation{Allocated: 10, Count: 5, ByNamespace: map[string]int64{"ns": 10}, Fold: []string{id}})
	if len(b.Reservations) != 0 {
		t.Fatalf("after freeing the sum: %v", b.Reservations)
	}
	f.wantUsage(t, key, ledger.Usage{Limit: 100, Allocated: 10, Available: 90})
}

func TestUndoAndReleaseLeaveSums(t *testing.T) {
	f, key, id := compactedBucket(t)
	mustReserve(t, f, claim("c5", req(project("p"), rtProjects, 2, nil)))
	mustReserve(t, f, claim("c6", req(project("p"), rtProjects, 2, nil)))
	// c7 is the fifth create held apart: c3..c5 go into a new sum. The call
	// that compacts keeps its own reservation, so its Undo gives back
	// exactly what it took.
	f.clock.now = t0.Add(time.Minute)
	_, taken := mustReserveUndoable(t, f, claim("c7", req(project("p"), rtProjects, 3, nil)))
	if ids, held := sums(bucket(t, f, key)); len(ids) != 2 || held != 8 {
		t.Fatalf("sums %v holding with the rest %d creates, want two and 8", ids, held)
	}
	mustUndo(t, f, taken)
	f.wantUsage(t, key, ledger.Usage{Limit: 100, Reserved: 14, Available: 86})
	for i := range 8 {
		if err := f.ledger.Release(f.ctx, claim(fmt.Sprintf("c%d", i), req(project("p"), rtProjects, 2, nil))); err != nil {
			t.Fatal(err)
		}
	}
	// c6 is released; the sums of c0..c5 stay.
	b := bucket(t, f, key)
	if ids, held := sums(b); len(ids) != 2 || held != 6 || len(b.Reservations) != 2 || b.Reservations[id].Amount != 6 {
		t.Fatalf("after Undo and Release: %v", b.Reservations)
	}
	f.wantUsage(t, key, ledger.Usage{Limit: 100, Reserved: 12, Available: 88})
	// Nothing reserves, replays or releases under a sum's id.
	for _, err := range []error{
		f.ledger.Release(f.ctx, claim(id, req(project("p"), rtProjects, 2, nil))),
		func() error {
			_, err := f.ledger.Reserve(f.ctx, claim(id, req(project("p"), rtProjects, 6, nil)))
			return err
		}(),
	} {
		if !errors.Is(err, ledger.ErrInvalid) {
			t.Fatalf("claim under %s: err = %v, want ErrInvalid", id, err)
		}
	}
	if diff := cmp.Diff(b, bucket(t, f, key)); diff != "" {
		t.Fatalf("bucket changed (-before +after):\n%s", diff)
	}
}

func TestCompactAboveNegativeNeverCompacts(t *testing.T) {
	f := newCompactingFixture(t, -1)
	f.grant(t, "quota/g#0", project("p"), rtProjects, 5000, nil)
	key := ledger.NewBucketKey(project("p"), rtProjects, nil)
	for i := range ledger.DefaultCompactAbove + 1 {
		mustReserve(t, f, claim(fmt.Sprintf("c%d", i), req(project("p"), rtProjects, 1, nil)))
	}
	if b := bucket(t, f, key); len(b.Reservations) != ledger.DefaultCompactAbove+1 {
		t.Fatalf("%d reservations, want every one", len(b.Reservations))
	}
}

func TestCompactAboveDefaults(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "quota/g#0", project("p"), rtProjects, 5000, nil)
	key := ledger.NewBucketKey(project("p"), rtProjects, nil)
	for i := range ledger.DefaultCompactAbove + 1 {
		mustReserve(t, f, claim(fmt.Sprintf("c%d", i), req(project("p"), rtProjects, 1, nil)))
		if i+1 == ledger.DefaultCompactAbove {
			if ids, _ := sums(bucket(t, f, key)); len(ids) != 0 {
				t.Fatalf("compacted at the default threshold: %v", ids)
			}
		}
	}
	if ids, held := sums(bucket(t, f, key)); len(ids) != 1 || held != ledger.DefaultCompactAbove+1 {
		t.Fatalf("past the default threshold: sums %v holding %d creates", ids, held)
	}
}
