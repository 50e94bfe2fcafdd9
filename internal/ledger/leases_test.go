package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledger/ledgertest"
)

// replica is one Gatekeeper replica's ledger with leases on, over a store
// the replicas share, its lease runner running until stop.
type replica struct {
	ledger *ledger.Ledger
	stop   context.CancelFunc
	done   chan error
}

func startReplica(t *testing.T, store ledger.Store, grants ledger.GrantSource, name string, opts ledger.LeaseOptions, more ...ledger.Option) *replica {
	t.Helper()
	opts.Holder = name
	r := &replica{ledger: ledger.New(store, grants, append(more, ledger.WithLeases(opts))...), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.done <- r.ledger.RunLeases(ctx) }()
	t.Cleanup(func() { _ = r.halt(t) }) // a test that wants its error halts first
	return r
}

// halt stops the runner, which gives its leases back; a second halt waits
// for nothing.
func (r *replica) halt(t *testing.T) error {
	t.Helper()
	r.stop()
	select {
	case err := <-r.done:
		r.done <- nil
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("RunLeases did not return 10 s after its context ended")
		return nil
	}
}

func leasesOf(b ledger.Bucket) []ledger.Reservation {
	var out []ledger.Reservation
	for id, r := range b.Reservations {
		if ledger.IsLease(id) {
			out = append(out, r)
		}
	}
	return out
}

// Three replicas with leases race creates into one bucket until the quota
// is gone. Counted independently (the granted decisions), the creates never
// pass the limit at any moment, and they reach it exactly: near the limit
// leases shrink to nothing and the last of the quota is decided
// synchronously. Once the replicas stop, the bucket holds exactly one
// reservation per granted create, and no lease.
func TestLeasesNeverAdmitPastTheLimitAndReachItExactly(t *testing.T) {
	const limit, workers = 3000, 24
	store, grants := ledger.NewMemoryStore(), ledger.NewGrantSet()
	if err := grants.Set(ledger.Grant{ID: "quota/g#0", Generation: 1, Consumer: org("o"), ResourceType: rtProjects, Amount: limit}); err != nil {
		t.Fatal(err)
	}
	key := ledger.NewBucketKey(org("o"), rtProjects, nil)
	opts := ledger.LeaseOptions{Interval: 2 * time.Millisecond, Share: 8, MinCreates: 8}
	// No observer folds here: compaction off, so every reservation stays
	// one create's.
	replicas := []*replica{
		startReplica(t, store, grants, "gk-0", opts, ledger.WithCompactAbove(-1)),
		startReplica(t, store, grants, "gk-1", opts, ledger.WithCompactAbove(-1)),
		startReplica(t, store, grants, "gk-2", opts, ledger.WithCompactAbove(-1)),
	}

	var granted atomic.Int64
	var mu sync.Mutex
	grantedIDs := map[string]bool{}
	var sawLease, stop atomic.Bool
	sampler := make(chan struct{})
	go func() { // an independent look at the bucket while the creates run
		defer close(sampler)
		for !stop.Load() {
			b, _, err := store.Get(context.Background(), key)
			if err == nil && len(leasesOf(b)) > 0 {
				sawLease.Store(true)
			}
			if n := granted.Load(); n > limit {
				t.Errorf("%d creates granted, past the limit %d", n, limit)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var seq atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			l := replicas[w%len(replicas)].ledger
			deniedSince := time.Time{}
			for {
				id := fmt.Sprintf("c%d", seq.Add(1))
				d, err := l.Reserve(context.Background(), claim(id, req(org("o"), rtProjects, 1, nil)))
				if err != nil {
					t.Errorf("reserve %s: %v", id, err)
					return
				}
				if d.Granted {
					granted.Add(1)
					mu.Lock()
					grantedIDs[id] = true
					mu.Unlock()
					deniedSince = time.Time{}
					continue
				}
				// Denied: stop once every lease had time to come back.
				if deniedSince.IsZero() {
					deniedSince = time.Now()
				}
				if time.Since(deniedSince) > 200*time.Millisecond {
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	<-sampler
	for _, r := range replicas {
		if err := r.halt(t); err != nil {
			t.Fatalf("giving the leases back: %v", err)
		}
	}
	if !sawLease.Load() {
		t.Fatal("no lease was ever taken: the test did not exercise leases")
	}
	if n := granted.Load(); n != limit {
		t.Fatalf("%d creates granted, want exactly the limit %d", n, limit)
	}
	b, _, err := store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if ls := leasesOf(b); len(ls) != 0 {
		t.Fatalf("leases left after every replica stopped: %+v", ls)
	}
	if len(b.Reservations) != limit {
		t.Fatalf("%d reservations, want one per granted create (%d)", len(b.Reservations), limit)
	}
	for id, r := range b.Reservations {
		if !grantedIDs[id] || r.Amount != 1 {
			t.Fatalf("reservation %s %+v is not a granted create's", id, r)
		}
	}
}

// A create admitted inside a lease is written nowhere until the next
// round; undone before it, its room goes back to the lease and it is never
// written; undone after, its recorded reservation is removed.
func TestLeasedCreateUndoneBeforeAndAfterItIsRecorded(t *testing.T) {
	store, grants := ledger.NewMemoryStore(), ledger.NewGrantSet()
	if err := grants.Set(ledger.Grant{ID: "quota/g#0", Generation: 1, Consumer: org("o"), ResourceType: rtProjects, Amount: 10000}); err != nil {
		t.Fatal(err)
	}
	key := ledger.NewBucketKey(org("o"), rtProjects, nil)
	r := startReplica(t, store, grants, "gk-0", ledger.LeaseOptions{Interval: time.Hour})
	l := r.ledger
	ctx := context.Background()

	// The first create goes the synchronous way and asks for a lease,
	// which the runner takes at once (woken, not at its hourly tick).
	if d, err := l.Reserve(ctx, claim("first", req(org("o"), rtProjects, 1, nil))); err != nil || !d.Granted {
		t.Fatalf("first: %+v, %v", d, err)
	}
	var lease ledger.Reservation
	waitFor(t, "a lease", func() bool {
		b, _, _ := store.Get(ctx, key)
		ls := leasesOf(b)
		if len(ls) == 1 {
			lease = ls[0]
		}
		return len(ls) == 1
	})
	// A sixteenth of the headroom: 10000 − 1 reserved, or 10000 if the
	// runner's round came before the first create's write.
	if (lease.Amount != 9999/16 && lease.Amount != 10000/16) || !strings.HasPrefix(lease.ClaimID, "lease/gk-0-") || lease.Object.Kind != "CapacityLease" {
		t.Fatalf("lease %+v, want %d or %d units under lease/gk-0-<start>/<n>", lease, 9999/16, 10000/16)
	}

	d, taken, err := l.ReserveUndoable(ctx, claim("local", req(org("o"), rtProjects, 5, nil)))
	if err != nil || !d.Granted {
		t.Fatalf("local: %+v, %v", d, err)
	}
	b, _, _ := store.Get(ctx, key)
	if _, ok := b.Reservations["local"]; ok {
		t.Fatal("a create admitted inside the lease was written synchronously")
	}
	if err := l.Undo(ctx, taken); err != nil {
		t.Fatal(err)
	}
	// Replayed after the undo: admitted again (nothing held it).
	if _, taken, err = l.ReserveUndoable(ctx, claim("again", req(org("o"), rtProjects, 5, nil))); err != nil || taken.Empty() {
		t.Fatalf("again: %+v, %v", taken, err)
	}
	if err := r.halt(t); err != nil { // gives the lease back, recording "again"
		t.Fatal(err)
	}
	b, _, _ = store.Get(ctx, key)
	if _, ok := b.Reservations["local"]; ok {
		t.Fatal("the undone create was recorded")
	}
	if got := b.Reservations["again"]; got.Amount != 5 {
		t.Fatalf("the create admitted inside the lease was not recorded: %+v", b.Reservations)
	}
	if len(leasesOf(b)) != 0 {
		t.Fatalf("lease not given back: %+v", b.Reservations)
	}
	if err := l.Undo(ctx, taken); err != nil {
		t.Fatal(err)
	}
	b, _, _ = store.Get(ctx, key)
	if _, ok := b.Reservations["again"]; ok {
		t.Fatal("undo after the record left the reservation")
	}
}

// A replica that dies holding a lease with creates admitted and never
// recorded leaves a lease whose amount covers them: the other replica can
// take only what is left, and the lease lapses (for the observer's
// barrier) LeaseSkew after its expiry.
func TestACrashedHoldersLeaseCoversWhatItAdmitted(t *testing.T) {
	const limit = 1000
	shared, grants := ledger.NewMemoryStore(), ledger.NewGrantSet()
	if err := grants.Set(ledger.Grant{ID: "quota/g#0", Generation: 1, Consumer: org("o"), ResourceType: rtProjects, Amount: limit}); err != nil {
		t.Fatal(err)
	}
	key := ledger.NewBucketKey(org("o"), rtProjects, nil)
	ctx := context.Background()
	crashing := &ledgertest.CrashableStore{Store: shared}
	a := startReplica(t, crashing, grants, "gk-a", ledger.LeaseOptions{Interval: time.Hour, Share: 2, MinCreates: 1})
	if _, err := a.ledger.Reserve(ctx, claim("a0", req(org("o"), rtProjects, 1, nil))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a lease", func() bool { b, _, _ := shared.Get(ctx, key); return len(leasesOf(b)) == 1 })
	admitted := 0
	for i := range 100 {
		d, err := a.ledger.Reserve(ctx, claim(fmt.Sprintf("a%d", i+1), req(org("o"), rtProjects, 1, nil)))
		if err != nil || !d.Granted {
			t.Fatalf("a%d: %+v %v", i+1, d, err)
		}
		admitted++
	}
	crashing.Crash()
	if err := a.halt(t); err == nil {
		t.Fatal("the crashed replica gave its lease back")
	}
	b, _, _ := shared.Get(ctx, key)
	ls := leasesOf(b)
	if len(ls) != 1 || ls[0].Amount < int64(admitted) {
		t.Fatalf("lease %+v does not cover the %d creates admitted inside it", ls, admitted)
	}
	if ledger.LeaseLapsed(ls[0], ls[0].ExpiresAt.Add(ledger.LeaseSkew-time.Microsecond)) || !ledger.LeaseLapsed(ls[0], ls[0].ExpiresAt.Add(ledger.LeaseSkew)) {
		t.Fatal("a lease lapses exactly LeaseSkew after its expiry")
	}
	// The other replica, synchronous (no lease yet), gets what is left.
	other := ledger.New(shared, grants)
	n := 0
	for ; ; n++ {
		d, err := other.Reserve(ctx, claim(fmt.Sprintf("b%d", n), req(org("o"), rtProjects, 1, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if !d.Granted {
			break
		}
	}
	if total := 1 + admitted + n; total > limit {
		t.Fatalf("%d admitted in all, past the limit %d", total, limit)
	}
	if want := limit - 1 - int(ls[0].Amount); n != want {
		t.Fatalf("the other replica got %d, want the %d the lease leaves", n, want)
	}
}

// A lease its replica does not use is sized again every second to the
// headroom the others leave: as another replica fills the bucket
// synchronously, the lease shrinks to nothing and the other gets every
// unit, exactly the limit in all.
func TestAnUnusedLeaseComesBackWhenOthersTakeTheQuota(t *testing.T) {
	const limit = 100
	store, grants := ledger.NewMemoryStore(), ledger.NewGrantSet()
	if err := grants.Set(ledger.Grant{ID: "quota/g#0", Generation: 1, Consumer: org("o"), ResourceType: rtProjects, Amount: limit}); err != nil {
		t.Fatal(err)
	}
	key := ledger.NewBucketKey(org("o"), rtProjects, nil)
	ctx := context.Background()
	a := startReplica(t, store, grants, "gk-a", ledger.LeaseOptions{Interval: 10 * time.Millisecond, Share: 2, MinCreates: 1})
	if d, err := a.ledger.Reserve(ctx, claim("a0", req(org("o"), rtProjects, 1, nil))); err != nil || !d.Granted {
		t.Fatalf("a0: %+v %v", d, err)
	}
	waitFor(t, "a lease", func() bool { b, _, _ := store.Get(ctx, key); return len(leasesOf(b)) == 1 })

	other := ledger.New(store, grants) // synchronous
	got := 0
	deadline := time.Now().Add(20 * time.Second)
	for got < limit-1 {
		if time.Now().After(deadline) {
			b, _, _ := store.Get(ctx, key)
			t.Fatalf("after 20 s the other replica has %d of the %d left; leases %+v", got, limit-1, leasesOf(b))
		}
		d, err := other.Reserve(ctx, claim(fmt.Sprintf("b%d", got), req(org("o"), rtProjects, 1, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if d.Granted {
			got++
			continue
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d, err := other.Reserve(ctx, claim("one-too-many", req(org("o"), rtProjects, 1, nil))); err != nil || d.Granted {
		t.Fatalf("past the limit: %+v %v", d, err)
	}
	b, _, _ := store.Get(ctx, key)
	if ls := leasesOf(b); len(ls) != 0 {
		t.Fatalf("a lease left in a full bucket: %+v", ls)
	}
}

// A replica that cannot renew its lease (the API server unreachable) stops
// admitting inside it a second before it expires: from then on every create
// goes the synchronous way, which fails closed while the store does.
func TestALeaseThatCannotBeRenewedStopsAdmittingBeforeItExpires(t *testing.T) {
	shared, grants := ledger.NewMemoryStore(), ledger.NewGrantSet()
	if err := grants.Set(ledger.Grant{ID: "quota/g#0", Generation: 1, Consumer: org("o"), ResourceType: rtProjects, Amount: 10000}); err != nil {
		t.Fatal(err)
	}
	key := ledger.NewBucketKey(org("o"), rtProjects, nil)
	ctx := context.Background()
	store := &ledgertest.CrashableStore{Store: shared}
	const duration = 2 * time.Second
	a := startReplica(t, store, grants, "gk-a", ledger.LeaseOptions{Duration: duration, Interval: 10 * time.Millisecond})
	if _, err := a.ledger.Reserve(ctx, claim("first", req(org("o"), rtProjects, 1, nil))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a lease", func() bool { b, _, _ := shared.Get(ctx, key); return len(leasesOf(b)) == 1 })
	store.Crash()
	time.Sleep(50 * time.Millisecond) // a renewal in flight lands, or never will
	b, _, _ := shared.Get(ctx, key)
	lease := leasesOf(b)[0]
	for i := 0; ; i++ {
		d, err := a.ledger.Reserve(ctx, claim(fmt.Sprintf("c%d", i), req(org("o"), rtProjects, 1, nil)))
		if err != nil {
			// The synchronous path, failing with the store.
			if now := time.Now(); !now.Before(lease.ExpiresAt) {
				t.Fatalf("admitted inside the lease until %s, after its expiry %s", now.Format(time.StampMicro), lease.ExpiresAt.Format(time.StampMicro))
			}
			if i == 0 {
				t.Fatal("nothing admitted inside the lease")
			}
			return
		}
		if !d.Granted {
			t.Fatalf("c%d denied inside a lease with room", i)
		}
		if time.Now().After(lease.ExpiresAt.Add(time.Second)) {
			t.Fatalf("still admitting a second after the lease's expiry %s", lease.ExpiresAt.Format(time.StampMicro))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAClaimCannotTakeALeasesID(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "quota/g#0", org("o"), rtProjects, 10, nil)
	_, err := f.ledger.Reserve(f.ctx, claim("lease/gk-0/1", req(org("o"), rtProjects, 1, nil)))
	if err == nil || !strings.Contains(err.Error(), `id: must not begin with "lease/", which names capacity leases`) {
		t.Fatalf("got %v, want the id refused", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 10 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
