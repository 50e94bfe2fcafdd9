package ledger_test

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
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

// Claims against a project cap and an organization cap race with an
// observer. After a grant each claim's object either appears (and may be
// deleted again), never appears (the observer expires its reservation), or
// is released; the observer repeatedly counts the live objects and folds
// their reservations. No bucket may ever be seen above its limit, and once
// everything has settled and been observed, allocated is the sum of the live
// objects in every bucket and nothing is reserved.
func TestConcurrentReserveObserveProjectAndOrg(t *testing.T) {
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

	w := newWorld()
	done := make(chan struct{})
	var background sync.WaitGroup
	background.Go(func() {
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
	background.Go(func() { // the observer: one, as the leader runs it
		for {
			select {
			case <-done:
				return
			default:
			}
			w.observe(t, f, keys)
		}
	})

	var wg sync.WaitGroup
	start := make(chan struct{})
	for wk := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewSource(int64(wk)))
			<-start
			for n := range claimsPerWorker {
				amount := 1 + r.Int63n(3)
				reqs := []ledger.Request{req(projects[wk%len(projects)], rtProjects, amount, nil), req(org("o"), rtProjects, amount, nil)}
				if r.Intn(2) == 0 {
					reqs[0], reqs[1] = reqs[1], reqs[0]
				}
				c := claim(fmt.Sprintf("w%d-c%d", wk, n), reqs...)
				d, err := f.ledger.Reserve(f.ctx, c)
				if err != nil {
					t.Errorf("reserve: %v", err)
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
				switch r.Intn(6) {
				case 0: // decided by a controller, then deleted
					if err := f.ledger.Release(f.ctx, c); err != nil {
						t.Errorf("release: %v", err)
					}
				case 1: // rejected later in the admission chain
					w.gone(c)
				case 2: // created, later deleted
					w.appear(c)
					time.Sleep(time.Duration(r.Intn(100)) * time.Microsecond)
					w.gone(c)
				default:
					w.appear(c)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(done)
	background.Wait()

	w.observe(t, f, keys) // after quiescence
	want := w.sums()
	if want[keys[0]] == 0 {
		t.Fatal("no object is live at all")
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
		if u.Allocated != want[k] || u.Reserved != 0 || u.Allocated > u.Limit {
			t.Fatalf("bucket %s: %+v, want allocated %d (the live objects), reserved 0, within limit; reservations %v", k, u, want[k], b.Reservations)
		}
	}
	t.Logf("%d live objects after %d observations; org bucket at %d of %d", len(w.live), w.observations, want[keys[0]], orgLimit)
}

// world is the objects a concurrency test's claims were for: live ones
// (created) and gone ones (deleted, or never created).
type world struct {
	mu           sync.Mutex
	live         map[string]ledger.Claim
	goneIDs      map[string]bool
	observations int
}

func newWorld() *world { return &world{live: map[string]ledger.Claim{}, goneIDs: map[string]bool{}} }

func (w *world) appear(c ledger.Claim) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.live[c.ID] = c
}

func (w *world) gone(c ledger.Claim) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.live, c.ID)
	w.goneIDs[c.ID] = true
}

// sums is what the live objects count per bucket.
func (w *world) sums() map[ledger.BucketKey]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[ledger.BucketKey]int64{}
	for _, c := range w.live {
		for _, r := range c.Requests {
			out[ledger.NewBucketKey(r.Consumer, r.ResourceType, r.Dimensions)] += r.Amount
		}
	}
	return out
}

// observe is one observer pass: from one snapshot of the world, count the
// live objects, fold their reservations and expire the gone ones'.
func (w *world) observe(t *testing.T, f *fixture, keys []ledger.BucketKey) {
	w.mu.Lock()
	counted := map[ledger.BucketKey][]string{}
	sums := map[ledger.BucketKey]int64{}
	for id, c := range w.live {
		for _, r := range c.Requests {
			k := ledger.NewBucketKey(r.Consumer, r.ResourceType, r.Dimensions)
			counted[k] = append(counted[k], id)
			sums[k] += r.Amount
		}
	}
	var expire []string
	for id := range w.goneIDs {
		expire = append(expire, id)
	}
	w.observations++
	w.mu.Unlock()
	for _, k := range keys {
		obs := ledger.Observation{Allocated: sums[k], Count: int64(len(counted[k])), Fold: counted[k], Expire: expire}
		if sums[k] > 0 {
			obs.ByNamespace = map[string]int64{"ns": sums[k]}
		}
		if _, err := f.ledger.Observe(f.ctx, k, obs); err != nil {
			t.Errorf("observe %s: %v", k, err)
		}
	}
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
		mustReserve(t, f, blocker)
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
