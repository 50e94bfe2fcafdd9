package ledger_test

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotakeeper/quotakeeper/ledger"
)

func TestConcurrentReserveOneBucket(t *testing.T) {
	const workers = 64
	for _, limit := range []int64{40, 64, 100} {
		t.Run(fmt.Sprintf("limit%d", limit), func(t *testing.T) {
			f := newFixture(t)
			f.grant(t, "quota/g#0", project("p"), rtProjects, limit, nil)
			key := ledger.NewBucketKey(project("p"), rtProjects, nil)
			var granted, denied atomic.Int64
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range workers {
				wg.Go(func() {
					<-start
					d, err := f.ledger.Reserve(f.ctx, claim(fmt.Sprintf("c%d", i), req(project("p"), rtProjects, 1, nil)))
					if err != nil {
						t.Errorf("reserve: %v", err)
						return
					}
					if d.Granted {
						granted.Add(1)
						return
					}
					denied.Add(1)
					if r := d.Requests[0]; r.Reason != ledger.ReasonQuotaExceeded || r.Available != 0 || r.Reserved != limit {
						t.Errorf("denied with %+v, want QuotaExceeded at reserved=%d available=0", r, limit)
					}
				})
			}
			close(start)
			wg.Wait()
			want := min(limit, workers)
			if granted.Load() != want || denied.Load() != workers-want {
				t.Fatalf("granted %d denied %d, want %d and %d", granted.Load(), denied.Load(), want, workers-want)
			}
			f.wantUsage(t, key, ledger.Usage{Limit: limit, Allocated: 0, Reserved: want, Available: limit - want})
			b, _, _ := f.store.Get(f.ctx, key)
			if int64(len(b.Reservations)) != want {
				t.Fatalf("%d reservations, want %d", len(b.Reservations), want)
			}
		})
	}
}

// Claims against a project cap and an organization cap race; some are
// released again while others are still being admitted. Every claim that
// ends up held must be held in both buckets, and no bucket may ever be seen
// above its limit.
func TestConcurrentReserveProjectAndOrg(t *testing.T) {
	const (
		workers         = 64
		claimsPerWorker = 6
		projectLimit    = 20
		orgLimit        = 50
	)
	f := newFixture(t)
	projects := []ledger.Consumer{project("p0"), project("p1"), project("p2"), project("p3")}
	keys := []ledger.BucketKey{ledger.NewBucketKey(org("o"), rtProjects, nil)}
	f.grant(t, "quota/org#0", org("o"), rtProjects, orgLimit, nil)
	for i, p := range projects {
		f.grant(t, ledger.GrantID("quota", p.Name, 0), p, rtProjects, projectLimit, nil)
		keys = append(keys, ledger.NewBucketKey(projects[i], rtProjects, nil))
	}

	done := make(chan struct{})
	var monitor sync.WaitGroup
	monitor.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			for _, k := range keys {
				b, ok, err := f.store.Get(f.ctx, k)
				if err != nil || !ok {
					continue
				}
				u, err := b.Usage()
				if err != nil || u.Allocated+u.Reserved > u.Limit {
					t.Errorf("bucket %s seen at %+v (err %v)", k, u, err)
					return
				}
			}
		}
	})

	var mu sync.Mutex
	held := map[string]ledger.Claim{} // claims granted and not released
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewSource(int64(w)))
			<-start
			for n := range claimsPerWorker {
				amount := 1 + r.Int63n(3)
				reqs := []ledger.Request{req(projects[w%len(projects)], rtProjects, amount, nil), req(org("o"), rtProjects, amount, nil)}
				if r.Intn(2) == 0 {
					reqs[0], reqs[1] = reqs[1], reqs[0]
				}
				c := claim(fmt.Sprintf("w%d-c%d", w, n), reqs...)
				take := f.ledger.Reserve
				if w%2 == 1 {
					take = f.ledger.Allocate
				}
				d, err := take(f.ctx, c)
				if err != nil {
					t.Errorf("take: %v", err)
					return
				}
				if !d.Granted {
					continue
				}
				for _, rd := range d.Requests {
					if rd.Allocated+rd.Reserved > rd.Limit {
						t.Errorf("granted %s above limit: %+v", c.ID, rd)
					}
				}
				if r.Intn(3) == 0 {
					if err := f.ledger.Release(f.ctx, c); err != nil {
						t.Errorf("release: %v", err)
					}
					continue
				}
				mu.Lock()
				held[c.ID] = c
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	close(done)
	monitor.Wait()

	want := map[ledger.BucketKey]int64{}
	for _, c := range held {
		for _, r := range c.Requests {
			want[ledger.NewBucketKey(r.Consumer, r.ResourceType, r.Dimensions)] += r.Amount
		}
	}
	if want[keys[0]] == 0 {
		t.Fatal("no claim was held at all")
	}
	for _, k := range keys {
		b, _, err := f.store.Get(f.ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		u, err := b.Usage()
		if err != nil {
			t.Fatal(err)
		}
		if u.Allocated+u.Reserved != want[k] || u.Allocated+u.Reserved > u.Limit {
			t.Fatalf("bucket %s: %+v, want allocated+reserved = %d (sum of held claims) within limit", k, u, want[k])
		}
		for id := range b.Allocations {
			if _, ok := held[id]; !ok {
				t.Fatalf("bucket %s holds allocation of released or denied claim %s", k, id)
			}
		}
		for id := range b.Reservations {
			if _, ok := held[id]; !ok {
				t.Fatalf("bucket %s holds reservation of released or denied claim %s", k, id)
			}
		}
	}
	t.Logf("held %d claims; org bucket at %d of %d", len(held), want[keys[0]], orgLimit)
}

// Concurrent replays of one claim id must leave it held exactly once in every
// bucket, or in none.
func TestConcurrentReplaySameClaim(t *testing.T) {
	for _, orgLimit := range []int64{2, 1} {
		t.Run(fmt.Sprintf("org%d", orgLimit), func(t *testing.T) {
			f := newFixture(t)
			f.grant(t, "quota/p#0", project("p"), rtProjects, 10, nil)
			f.grant(t, "quota/o#0", org("o"), rtProjects, orgLimit, nil)
			c := claim("same", req(project("p"), rtProjects, 2, nil), req(org("o"), rtProjects, 2, nil))
			var granted atomic.Int64
			var wg sync.WaitGroup
			for range 32 {
				wg.Go(func() {
					d, err := f.ledger.Reserve(f.ctx, c)
					if err != nil {
						t.Errorf("reserve: %v", err)
					}
					if d.Granted {
						granted.Add(1)
					}
				})
			}
			wg.Wait()
			wantGranted, wantReserved := int64(32), int64(2)
			if orgLimit < 2 {
				wantGranted, wantReserved = 0, 0
			}
			if granted.Load() != wantGranted {
				t.Fatalf("granted %d times, want %d", granted.Load(), wantGranted)
			}
			f.wantUsage(t, ledger.NewBucketKey(project("p"), rtProjects, nil), ledger.Usage{Limit: 10, Reserved: wantReserved, Available: 10 - wantReserved})
			f.wantUsage(t, ledger.NewBucketKey(org("o"), rtProjects, nil), ledger.Usage{Limit: orgLimit, Reserved: wantReserved, Available: orgLimit - wantReserved})
		})
	}
}

// slowStore widens the window between one caller's steps so that racing
// calls interleave.
type slowStore struct{ ledger.Store }

func (s slowStore) Apply(ctx context.Context, key ledger.BucketKey, mutate func(*ledger.Bucket) error) (ledger.Bucket, error) {
	time.Sleep(50 * time.Microsecond)
	return s.Store.Apply(ctx, key, mutate)
}

// Replays of one claim race with a release that frees the organization
// bucket. Without per-claim serialization one replay could be refused and
// roll back the project bucket while another, seeing that project entry, goes
// on to take the freed organization bucket: the claim would end half-held.
func TestConcurrentReplayWithRelease(t *testing.T) {
	// The project bucket must be taken first for the race to exist.
	p := project("p")
	for i := 0; ledger.NewBucketKey(p, rtProjects, nil).Name() > ledger.NewBucketKey(org("o"), rtProjects, nil).Name(); i++ {
		p = project(fmt.Sprint("p", i))
	}
	for trial := range 30 {
		f := newFixture(t)
		f.ledger = ledger.New(slowStore{f.store}, f.grants, ledger.WithClock(f.clock.Now))
		f.grant(t, "quota/p#0", p, rtProjects, 10, nil)
		f.grant(t, "quota/o#0", org("o"), rtProjects, 2, nil)
		blocker := claim("blocker", req(org("o"), rtProjects, 2, nil))
		mustAllocate(t, f, blocker)
		c := claim("same", req(p, rtProjects, 2, nil), req(org("o"), rtProjects, 2, nil))
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				time.Sleep(time.Duration(w) * 20 * time.Microsecond)
				if _, err := f.ledger.Reserve(f.ctx, c); err != nil {
					t.Errorf("reserve: %v", err)
				}
			})
		}
		wg.Go(func() {
			time.Sleep(time.Duration(trial%10) * 20 * time.Microsecond)
			if err := f.ledger.Release(f.ctx, blocker); err != nil {
				t.Errorf("release: %v", err)
			}
		})
		wg.Wait()
		pu := f.usage(t, ledger.NewBucketKey(p, rtProjects, nil))
		ou := f.usage(t, ledger.NewBucketKey(org("o"), rtProjects, nil))
		if pu.Reserved != ou.Reserved || ou.Allocated != 0 {
			t.Fatalf("trial %d: claim half-held: project %+v, organization %+v", trial, pu, ou)
		}
	}
}
