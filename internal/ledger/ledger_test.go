package ledger_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

var projectsKey = ledger.NewBucketKey(project("p"), rtProjects, nil)

func mustReserve(t *testing.T, f *fixture, c ledger.Claim) ledger.Decision {
	t.Helper()
	d, err := f.ledger.Reserve(f.ctx, c)
	if err != nil {
		t.Fatalf("reserve %s: %v", c.ID, err)
	}
	return d
}

// observed is what an observer reports when it counts amount in namespace
// "ns" from one object, folding the listed reservations.
func observed(amount int64, fold ...string) ledger.Observation {
	return ledger.Observation{Allocated: amount, ByNamespace: map[string]int64{"ns": amount}, Count: 1, Fold: fold}
}

func mustObserve(t *testing.T, f *fixture, key ledger.BucketKey, obs ledger.Observation) ledger.Bucket {
	t.Helper()
	b, err := f.ledger.Observe(f.ctx, key, obs)
	if err != nil {
		t.Fatalf("observe %s: %v", key, err)
	}
	return b
}

func snapshot(t *testing.T, f *fixture) []ledger.Bucket {
	t.Helper()
	list, err := f.store.List(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// countingStore counts the writes that reached the store, per bucket.
type countingStore struct {
	ledger.Store
	mu     sync.Mutex
	writes map[ledger.BucketKey]int
}

func (s *countingStore) Apply(ctx context.Context, key ledger.BucketKey, mutate func(*ledger.Bucket) error) (ledger.Bucket, error) {
	b, err := s.Store.Apply(ctx, key, mutate)
	if err == nil {
		s.mu.Lock()
		s.writes[key]++
		s.mu.Unlock()
	}
	return b, err
}

func TestAdditiveGrants(t *testing.T) {
	f := newFixture(t)
	f.grant(t, ledger.GrantID("ns", "a", 0), project("p"), rtProjects, 3, nil)
	f.grant(t, ledger.GrantID("ns", "b", 0), project("p"), rtProjects, 2, nil)
	f.grant(t, ledger.GrantID("ns", "other", 0), project("q"), rtProjects, 7, nil)  // another consumer
	f.grant(t, ledger.GrantID("ns", "other", 1), project("p"), rtInstances, 7, nil) // another resource type
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 5, Available: 5})

	if d := mustReserve(t, f, claim("c1", req(project("p"), rtProjects, 5, nil))); !d.Granted {
		t.Fatalf("reserve 5 of 5 denied: %s", d.Message())
	}
	b, _, _ := f.store.Get(f.ctx, projectsKey)
	wantGrants := []ledger.GrantContribution{{GrantID: "ns/a#0", Amount: 3, Generation: 1}, {GrantID: "ns/b#0", Amount: 2, Generation: 1}}
	if diff := cmp.Diff(wantGrants, b.Grants); b.Limit != 5 || diff != "" {
		t.Fatalf("bucket limit %d, want 5; grants (-want +got):\n%s", b.Limit, diff)
	}
	if d := mustReserve(t, f, claim("c2", req(project("p"), rtProjects, 1, nil))); d.Granted {
		t.Fatal("reserve beyond 3+2 granted")
	}
}

func TestSelectors(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/base#0", project("p"), rtInstances, 10, mustSelector(t, "location"))   // any bucket with a location
	f.grant(t, "ns/dls#0", project("p"), rtInstances, 5, mustSelector(t, "location=DLS")) // extra for DLS only
	f.grant(t, "ns/all#0", project("p"), rtInstances, 1, nil)                             // nil: everything
	for _, tc := range []struct {
		dims  map[string]string
		limit int64
	}{
		{map[string]string{"location": "DLS"}, 16},
		{map[string]string{"location": "DFW"}, 11},
		{map[string]string{"location": "DLS", "zone": "a"}, 16},
		{nil, 1},
		{map[string]string{"zone": "a"}, 1},
	} {
		key := ledger.NewBucketKey(project("p"), rtInstances, tc.dims)
		f.wantUsage(t, key, ledger.Usage{Limit: tc.limit, Available: tc.limit})
		d := mustReserve(t, f, claim("c-"+key.Dimensions, req(project("p"), rtInstances, tc.limit, tc.dims)))
		if !d.Granted {
			t.Fatalf("dims %v: reserving the whole limit %d denied: %s", tc.dims, tc.limit, d.Message())
		}
		if d := mustReserve(t, f, claim("more-"+key.Dimensions, req(project("p"), rtInstances, 1, tc.dims))); d.Granted {
			t.Fatalf("dims %v: reserving beyond limit %d granted", tc.dims, tc.limit)
		}
	}
}

func TestLoweredLimitKeepsExistingBlocksNew(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	mustObserve(t, f, projectsKey, observed(4))
	mustReserve(t, f, claim("r", req(project("p"), rtProjects, 4, nil)))

	f.grant(t, "ns/g#0", project("p"), rtProjects, 5, nil)
	b, err := f.ledger.Refresh(f.ctx, projectsKey)
	if err != nil {
		t.Fatal(err)
	}
	if b.Limit != 5 || b.Allocated != 4 || len(b.Reservations) != 1 {
		t.Fatalf("after lowering: %+v", b)
	}
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 5, Allocated: 4, Reserved: 4, Available: 0})

	d := mustReserve(t, f, claim("new", req(project("p"), rtProjects, 1, nil)))
	if d.Granted || d.Message() != "requested 1 of resourcemanager.miloapis.com/projects, available 0 of 5 (allocated 4, reserved 4)" {
		t.Fatalf("new reserve over lowered limit: granted=%v %q", d.Granted, d.Message())
	}
	// The reserved object still appears and is counted, taking the bucket to
	// 8 of 5: observed usage is the truth, whatever the limit.
	mustObserve(t, f, projectsKey, ledger.Observation{Allocated: 8, ByNamespace: map[string]int64{"ns": 8}, Count: 2, Fold: []string{"r"}})
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 5, Allocated: 8, Reserved: 0, Available: 0})
	// Draining below the new limit makes room again, only down to it.
	mustObserve(t, f, projectsKey, observed(4))
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 5, Allocated: 4, Available: 1})
	if d := mustReserve(t, f, claim("new", req(project("p"), rtProjects, 1, nil))); !d.Granted {
		t.Fatalf("reserve within lowered limit denied: %s", d.Message())
	}
}

func TestOverflow(t *testing.T) {
	t.Run("grant sum", func(t *testing.T) {
		f := newFixture(t)
		f.grant(t, "ns/a#0", project("p"), rtProjects, math.MaxInt64, nil)
		f.grant(t, "ns/b#0", project("p"), rtProjects, math.MaxInt64, nil)
		_, err := f.ledger.Reserve(f.ctx, claim("c", req(project("p"), rtProjects, 1, nil)))
		if !errors.Is(err, ledger.ErrOverflow) {
			t.Fatalf("reserve with overflowing grants: err = %v, want ErrOverflow", err)
		}
		if _, err := f.ledger.Usage(f.ctx, projectsKey); !errors.Is(err, ledger.ErrOverflow) {
			t.Fatalf("usage with overflowing grants: err = %v, want ErrOverflow", err)
		}
		if _, err := f.ledger.Refresh(f.ctx, projectsKey); !errors.Is(err, ledger.ErrOverflow) {
			t.Fatalf("refresh with overflowing grants: err = %v, want ErrOverflow", err)
		}
		if list := snapshot(t, f); len(list) != 0 {
			t.Fatalf("overflow wrote buckets: %+v", list)
		}
	})
	t.Run("allocated+reserved+amount", func(t *testing.T) {
		f := newFixture(t)
		f.grant(t, "ns/a#0", project("p"), rtProjects, math.MaxInt64, nil)
		if d := mustReserve(t, f, claim("one", req(project("p"), rtProjects, 1, nil))); !d.Granted {
			t.Fatalf("reserving 1 of MaxInt64 denied: %s", d.Message())
		}
		before := snapshot(t, f)
		if _, err := f.ledger.Observe(f.ctx, projectsKey, observed(math.MaxInt64)); !errors.Is(err, ledger.ErrOverflow) {
			t.Fatalf("observation that overflows with the reservation: err = %v, want ErrOverflow", err)
		}
		if diff := cmp.Diff(before, snapshot(t, f)); diff != "" {
			t.Fatalf("overflowing observation changed state (-before +after):\n%s", diff)
		}
		mustObserve(t, f, projectsKey, observed(math.MaxInt64, "one")) // folding it fits
		before = snapshot(t, f)
		_, err := f.ledger.Reserve(f.ctx, claim("two", req(project("p"), rtProjects, 1, nil)))
		if !errors.Is(err, ledger.ErrOverflow) || errors.Is(err, ledger.ErrQuotaExceeded) {
			t.Fatalf("reserve that overflows: err = %v, want ErrOverflow and not a refusal", err)
		}
		if diff := cmp.Diff(before, snapshot(t, f)); diff != "" {
			t.Fatalf("overflowing reserve changed state (-before +after):\n%s", diff)
		}
	})
	t.Run("merged requests", func(t *testing.T) {
		f := newFixture(t)
		f.grant(t, "ns/a#0", project("p"), rtProjects, math.MaxInt64, nil)
		_, err := f.ledger.Reserve(f.ctx, claim("c", req(project("p"), rtProjects, math.MaxInt64, nil), req(project("p"), rtProjects, 1, nil)))
		if !errors.Is(err, ledger.ErrOverflow) || !errors.Is(err, ledger.ErrInvalid) {
			t.Fatalf("merged overflow: err = %v, want ErrOverflow and ErrInvalid", err)
		}
		if want := "requests[1].amount: sum with earlier requests for the same bucket: int64 overflow: 9223372036854775807 + 1"; err.Error() != want {
			t.Fatalf("merged overflow: %q, want %q", err, want)
		}
	})
}

func TestValidation(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	mustReserve(t, f, claim("existing", req(project("p"), rtProjects, 2, nil)))
	before := snapshot(t, f)

	good := req(project("p"), rtProjects, 1, nil)
	for _, tc := range []struct {
		name  string
		claim ledger.Claim
		want  string
	}{
		{"empty id", claim("", good), "id: must not be empty"},
		{"no requests", claim("c"), "requests: must not be empty"},
		{"negative amount", claim("c", good, req(project("p"), rtProjects, -3, nil)), "requests[1].amount: must be positive, got -3"},
		{"zero amount", claim("c", req(project("p"), rtProjects, 0, nil)), "requests[0].amount: must be positive, got 0"},
		{"total below the amount", claim("c/0/3", ledger.Request{Consumer: project("p"), ResourceType: rtProjects, Amount: 3, Total: 2}),
			"requests[0].total: must be 0 (a create) or at least amount 3, got 2"},
		{"negative total", claim("c/0/3", ledger.Request{Consumer: project("p"), ResourceType: rtProjects, Amount: 3, Total: -1}),
			"requests[0].total: must be 0 (a create) or at least amount 3, got -1"},
		{"empty resource type", claim("c", req(project("p"), "", 1, nil)), "requests[0].resourceType: must not be empty"},
		{"consumer without kind or name", claim("c", good, req(ledger.Consumer{APIGroup: "g"}, rtProjects, 1, nil)),
			"requests[1].consumer.kind: must not be empty; requests[1].consumer.name: must not be empty"},
		{"bad dimension", claim("c", req(project("p"), rtProjects, 1, map[string]string{"location": "a,b=c"})),
			`requests[0].dimensions[location]: invalid value "a,b=c": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
		{"everything at once", ledger.Claim{Requests: []ledger.Request{{Amount: -1}}},
			"id: must not be empty; requests[0].consumer.kind: must not be empty; requests[0].consumer.name: must not be empty; requests[0].resourceType: must not be empty; requests[0].amount: must be positive, got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errReserve := f.ledger.Reserve(f.ctx, tc.claim)
			errRelease := f.ledger.Release(f.ctx, tc.claim)
			for _, err := range []error{errReserve, errRelease} {
				var verr *ledger.ValidationError
				if !errors.As(err, &verr) || !errors.Is(err, ledger.ErrInvalid) || err.Error() != tc.want {
					t.Fatalf("err = %v, want ValidationError %q", err, tc.want)
				}
			}
			if diff := cmp.Diff(before, snapshot(t, f)); diff != "" {
				t.Fatalf("invalid claim changed state (-before +after):\n%s", diff)
			}
		})
	}
}

func TestIdempotentReplay(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	f.grant(t, "ns/o#0", org("o"), rtProjects, 3, nil)
	c := claim("c", req(project("p"), rtProjects, 2, nil), req(org("o"), rtProjects, 2, nil))
	first := mustReserve(t, f, c)
	if !first.Granted {
		t.Fatalf("first reserve denied: %s", first.Message())
	}
	state := snapshot(t, f)
	f.clock.now = f.clock.now.Add(time.Minute) // a replay must not extend the reservation
	if diff := cmp.Diff(first, mustReserve(t, f, c)); diff != "" {
		t.Fatalf("replay decision differs (-first +again):\n%s", diff)
	}
	if diff := cmp.Diff(state, snapshot(t, f)); diff != "" {
		t.Fatalf("replay changed state (-before +after):\n%s", diff)
	}
	// A replay asking for more (two constraints counting one object into
	// one bucket with different amounts) reserves the difference, all or
	// nothing: the org bucket has 1 left, so +3 is refused and nothing
	// changes; +1 fits and grows both reservations. The refusal reports
	// the numbers the claim competes for, without its own 2: which of two
	// constraints reserves first is not the user's to know (a message that
	// counted them said "available 0 of 3 (reserved 3)").
	bigger := claim("c", req(project("p"), rtProjects, 5, nil), req(org("o"), rtProjects, 5, nil))
	if d := mustReserve(t, f, bigger); d.Granted {
		t.Fatalf("larger replay granted past the org's limit: %s", d.Message())
	} else if want := "requested 5 of " + rtProjects + ", available 3 of 3 (allocated 0, reserved 0)"; d.Message() != want {
		t.Fatalf("larger replay's refusal: %q\nwant %q", d.Message(), want)
	}
	if diff := cmp.Diff(state, snapshot(t, f)); diff != "" {
		t.Fatalf("refused larger replay changed state (-before +after):\n%s", diff)
	}
	grown := claim("c", req(project("p"), rtProjects, 3, nil), req(org("o"), rtProjects, 3, nil))
	if d := mustReserve(t, f, grown); !d.Granted {
		t.Fatalf("larger replay that fits denied: %s", d.Message())
	}
	f.wantUsage(t, ledger.NewBucketKey(org("o"), rtProjects, nil), ledger.Usage{Limit: 3, Reserved: 3})
	if err := f.ledger.Release(f.ctx, grown); err != nil {
		t.Fatal(err)
	}
	mustReserve(t, f, c)
	// A replayed observation changes nothing either.
	mustObserve(t, f, projectsKey, observed(2, "c"))
	observedState := snapshot(t, f)
	mustObserve(t, f, projectsKey, observed(2, "c"))
	if diff := cmp.Diff(observedState, snapshot(t, f)); diff != "" {
		t.Fatalf("replayed observation changed state (-before +after):\n%s", diff)
	}
}

func TestMergeSameBucket(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	dims := map[string]string{"location": "DFW"}
	d := mustReserve(t, f, claim("c", req(project("p"), rtProjects, 2, dims), req(project("p"), rtProjects, 3, map[string]string{"location": "DFW"})))
	if !d.Granted || len(d.Requests) != 1 || d.Requests[0].Request.Amount != 5 || d.Requests[0].Reserved != 5 {
		t.Fatalf("merged decision: %+v", d)
	}
	f.wantUsage(t, ledger.NewBucketKey(project("p"), rtProjects, dims), ledger.Usage{Limit: 10, Reserved: 5, Available: 5})
}

// TestRollbackOnRefusal makes the bucket that sorts first fit and the second
// refuse, so the first is really taken and must be rolled back; then the
// other way round, where the second is never attempted but still reported.
func TestRollbackOnRefusal(t *testing.T) {
	for _, full := range []string{"second", "first"} {
		t.Run("full="+full, func(t *testing.T) {
			f := newFixture(t)
			pKey, oKey := ledger.NewBucketKey(project("p"), rtProjects, nil), ledger.NewBucketKey(org("o"), rtProjects, nil)
			first, second := project("p"), org("o")
			firstKey, secondKey := pKey, oKey
			if oKey.Name() < pKey.Name() {
				first, second, firstKey, secondKey = second, first, oKey, pKey
			}
			fits, refuses := first, second
			fitsKey, refusesKey := firstKey, secondKey
			if full == "first" {
				fits, refuses, fitsKey, refusesKey = second, first, secondKey, firstKey
			}
			f.grant(t, "ns/fits#0", fits, rtProjects, 10, nil)
			f.grant(t, "ns/refuses#0", refuses, rtProjects, 5, nil)
			mustObserve(t, f, fitsKey, observed(1))
			mustReserve(t, f, claim("r", req(fits, rtProjects, 1, nil)))
			mustObserve(t, f, refusesKey, observed(5))
			before := snapshot(t, f)

			counting := &countingStore{Store: f.store, writes: map[ledger.BucketKey]int{}}
			f.ledger = ledger.New(counting, f.grants, ledger.WithClock(f.clock.Now))
			d := mustReserve(t, f, claim("c", req(fits, rtProjects, 1, nil), req(refuses, rtProjects, 1, nil)))
			wantWrites := map[ledger.BucketKey]int{fitsKey: 2} // taken, then rolled back
			if full == "first" {
				wantWrites = map[ledger.BucketKey]int{} // refused first: the other is only read
			}
			if diff := cmp.Diff(wantWrites, counting.writes); diff != "" {
				t.Fatalf("writes (-want +got):\n%s", diff)
			}
			if d.Granted {
				t.Fatal("claim over the full bucket granted")
			}
			want := ledger.Decision{Requests: []ledger.RequestDecision{
				{Request: req(fits, rtProjects, 1, nil), Bucket: fitsKey.Name(), Reason: ledger.ReasonQuotaAvailable,
					Limit: 10, Allocated: 1, Reserved: 1, Available: 8,
					Message: "requested 1 of resourcemanager.miloapis.com/projects, available 8 of 10 (allocated 1, reserved 1)"},
				{Request: req(refuses, rtProjects, 1, nil), Bucket: refusesKey.Name(), Reason: ledger.ReasonQuotaExceeded,
					Limit: 5, Allocated: 5, Reserved: 0, Available: 0,
					Message: "requested 1 of resourcemanager.miloapis.com/projects, available 0 of 5 (allocated 5, reserved 0)"},
			}}
			if diff := cmp.Diff(want, d); diff != "" {
				t.Fatalf("decision (-want +got):\n%s", diff)
			}
			if got := d.Message(); got != want.Requests[1].Message {
				t.Fatalf("Message() = %q", got)
			}
			if diff := cmp.Diff(before, snapshot(t, f)); diff != "" {
				t.Fatalf("denied claim left state changed (-before +after):\n%s", diff)
			}
			f.wantUsage(t, fitsKey, ledger.Usage{Limit: 10, Allocated: 1, Reserved: 1, Available: 8})
		})
	}
}

func TestReservationTTLOption(t *testing.T) {
	f := newFixture(t)
	f.ledger = ledger.New(f.store, f.grants, ledger.WithClock(f.clock.Now), ledger.WithReservationTTL(5*time.Second))
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	mustReserve(t, f, claim("c", req(project("p"), rtProjects, 3, nil)))
	b, _, _ := f.store.Get(f.ctx, projectsKey)
	if r := b.Reservations["c"]; !r.ExpiresAt.Equal(t0.Add(5*time.Second)) || r.Amount != 3 || r.Object.UID != "uid-c" {
		t.Fatalf("reservation = %+v", r)
	}
}

func TestReleaseIdempotent(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	a := claim("a", req(project("p"), rtProjects, 4, nil))
	r := claim("r", req(project("p"), rtProjects, 3, nil))
	mustReserve(t, f, a)
	mustReserve(t, f, r)
	for range 2 {
		if err := f.ledger.Release(f.ctx, a); err != nil {
			t.Fatal(err)
		}
		f.wantUsage(t, projectsKey, ledger.Usage{Limit: 10, Reserved: 3, Available: 7})
	}
	for range 2 {
		if err := f.ledger.Release(f.ctx, r); err != nil {
			t.Fatal(err)
		}
		f.wantUsage(t, projectsKey, ledger.Usage{Limit: 10, Available: 10})
	}
	// Releasing a claim that never held anything creates no bucket.
	if err := f.ledger.Release(f.ctx, claim("x", req(project("nobody"), rtProjects, 1, nil))); err != nil {
		t.Fatal(err)
	}
	if list := snapshot(t, f); len(list) != 1 {
		t.Fatalf("%d buckets, want 1", len(list))
	}
}

func TestMessages(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	mustObserve(t, f, projectsKey, observed(1))
	d := mustReserve(t, f, claim("second", req(project("p"), rtProjects, 1, nil)))
	if want := "granted 1 of resourcemanager.miloapis.com/projects: available 8 of 10 (allocated 1, reserved 1)"; !d.Granted || d.Message() != want || d.Requests[0].Message != want {
		t.Fatalf("granted message %q, want %q", d.Message(), want)
	}
	mustObserve(t, f, projectsKey, observed(10, "second"))
	d = mustReserve(t, f, claim("over", req(project("p"), rtProjects, 1, nil)))
	if want := "requested 1 of resourcemanager.miloapis.com/projects, available 0 of 10 (allocated 10, reserved 0)"; d.Granted || d.Message() != want {
		t.Fatalf("denied message %q, want %q", d.Message(), want)
	}

	// Granted multi-request decisions join every message; denied ones only
	// the exceeded requests'.
	f.grant(t, "ns/i#0", project("p"), rtInstances, 4, nil)
	f.grant(t, "ns/o#0", org("o"), rtInstances, 2, nil)
	d = mustReserve(t, f, claim("two", req(project("p"), rtInstances, 2, nil), req(org("o"), rtInstances, 2, nil)))
	if want := "granted 2 of compute.miloapis.com/instances: available 2 of 4 (allocated 0, reserved 2); granted 2 of compute.miloapis.com/instances: available 0 of 2 (allocated 0, reserved 2)"; d.Message() != want {
		t.Fatalf("joined granted message %q, want %q", d.Message(), want)
	}
	d = mustReserve(t, f, claim("three", req(project("p"), rtInstances, 3, nil), req(org("o"), rtInstances, 1, nil), req(project("p"), rtProjects, 1, nil)))
	if want := "requested 3 of compute.miloapis.com/instances, available 2 of 4 (allocated 0, reserved 2); requested 1 of compute.miloapis.com/instances, available 0 of 2 (allocated 0, reserved 2); requested 1 of resourcemanager.miloapis.com/projects, available 0 of 10 (allocated 10, reserved 0)"; d.Granted || d.Message() != want {
		t.Fatalf("joined denied message %q, want %q", d.Message(), want)
	}
}

func TestRefusedErrorIsTyped(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 1, nil)
	_, err := f.store.Apply(f.ctx, projectsKey, func(b *ledger.Bucket) error {
		return &ledger.RefusedError{Bucket: projectsKey.Name(), Key: projectsKey, ResourceType: rtProjects, Requested: 2, Limit: 1, Available: 1}
	})
	var refused *ledger.RefusedError
	if !errors.As(err, &refused) || !errors.Is(err, ledger.ErrQuotaExceeded) || refused.Requested != 2 {
		t.Fatalf("err = %v", err)
	}
	if want := "quota exceeded: bucket " + projectsKey.Name() + ": requested 2 of resourcemanager.miloapis.com/projects, available 1 of 1 (allocated 0, reserved 0)"; err.Error() != want {
		t.Fatalf("%q, want %q", err, want)
	}
	if _, ok, _ := f.store.Get(f.ctx, projectsKey); ok {
		t.Fatal("refused Apply created the bucket")
	}
}
