package ledger_test

import (
	"errors"
	"math"
	"testing"

	"github.com/quotakeeper/quotakeeper/ledger"
)

func TestRepairRestoresRemovesAndCorrects(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "g#0", project("p"), rtProjects, 10, nil)
	mustAllocate(t, f, claim("kept", req(project("p"), rtProjects, 2, nil)))
	mustAllocate(t, f, claim("orphan", req(project("p"), rtProjects, 3, nil)))
	mustAllocate(t, f, claim("wrong", req(project("p"), rtProjects, 1, nil)))
	mustReserve(t, f, claim("realized", req(project("p"), rtProjects, 1, nil)))
	mustReserve(t, f, claim("pending", req(project("p"), rtProjects, 1, nil)))

	b, err := f.ledger.Repair(f.ctx, projectsKey, ledger.Fix{
		Allocations: map[string]int64{"missing": 4, "wrong": 2, "realized": 1},
		Remove:      []string{"orphan", "never-there"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"kept": 2, "missing": 4, "wrong": 2, "realized": 1}
	if len(b.Allocations) != len(want) {
		t.Fatalf("allocations = %v, want %v", b.Allocations, want)
	}
	for id, amount := range want {
		if b.Allocations[id] != amount {
			t.Fatalf("allocations = %v, want %v", b.Allocations, want)
		}
	}
	if _, ok := b.Reservations["realized"]; ok || len(b.Reservations) != 1 {
		t.Fatalf("reservations = %v, want only pending", b.Reservations)
	}
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 10, Allocated: 9, Reserved: 1, Available: 0})
}

func TestRepairWritesOnlyWhenNeededOrAsked(t *testing.T) {
	f := newFixture(t)
	counting := &countingStore{Store: f.store, writes: map[ledger.BucketKey]int{}}
	l := ledger.New(counting, f.grants, ledger.WithClock(f.clock.Now))
	f.grant(t, "g#0", project("p"), rtProjects, 5, nil)
	if _, err := l.Allocate(f.ctx, claim("a", req(project("p"), rtProjects, 1, nil))); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Repair(f.ctx, projectsKey, ledger.Fix{Allocations: map[string]int64{"a": 1}, Remove: []string{"gone"}}); err != nil {
		t.Fatal(err)
	}
	if n := counting.writes[projectsKey]; n != 1 {
		t.Fatalf("a repair that changes nothing wrote: %d writes, want 1 (the allocation)", n)
	}
	if _, err := l.Repair(f.ctx, projectsKey, ledger.Fix{Rewrite: true}); err != nil {
		t.Fatal(err)
	}
	if n := counting.writes[projectsKey]; n != 2 {
		t.Fatalf("Rewrite did not write: %d writes, want 2", n)
	}
	// A lowered limit is written with the repair.
	f.grant(t, "g#0", project("p"), rtProjects, 0, nil)
	b, err := l.Repair(f.ctx, projectsKey, ledger.Fix{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Limit != 0 || counting.writes[projectsKey] != 3 {
		t.Fatalf("limit %d after %d writes, want 0 after 3", b.Limit, counting.writes[projectsKey])
	}
}

func TestRepairRejectsBadFixAndOverflow(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "g#0", project("p"), rtProjects, 5, nil)
	mustAllocate(t, f, claim("a", req(project("p"), rtProjects, 1, nil)))

	_, err := f.ledger.Repair(f.ctx, projectsKey, ledger.Fix{Allocations: map[string]int64{"b": 0, "a": 1}, Remove: []string{"a"}})
	if !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	if want := `allocations[b]: must be positive, got 0; remove[0]: claim id "a" is also in allocations`; err.Error() != want {
		t.Fatalf("err = %q, want %q", err, want)
	}
	_, err = f.ledger.Repair(f.ctx, projectsKey, ledger.Fix{Allocations: map[string]int64{"huge": math.MaxInt64}})
	if !errors.Is(err, ledger.ErrOverflow) {
		t.Fatalf("err = %v, want ErrOverflow", err)
	}
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 5, Allocated: 1, Available: 4})
}

func TestLimitIsWhatAWriteWouldRecord(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "b#0", project("p"), rtProjects, 2, nil)
	f.grant(t, "a#0", project("p"), rtProjects, 3, mustSelector(t, "tier=gold"))
	f.grant(t, "c#0", project("p"), rtProjects, 100, mustSelector(t, "tier=silver"))
	key := ledger.NewBucketKey(project("p"), rtProjects, map[string]string{"tier": "gold"})
	limit, contribs, err := f.ledger.Limit(key)
	if err != nil {
		t.Fatal(err)
	}
	want := []ledger.GrantContribution{{GrantID: "a#0", Amount: 3, Generation: 1}, {GrantID: "b#0", Amount: 2, Generation: 1}}
	if limit != 5 || len(contribs) != 2 || contribs[0] != want[0] || contribs[1] != want[1] {
		t.Fatalf("Limit = %d %+v, want 5 %+v", limit, contribs, want)
	}
	b, err := f.ledger.Refresh(f.ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if b.Limit != limit || len(b.Grants) != 2 || b.Grants[0] != want[0] || b.Grants[1] != want[1] {
		t.Fatalf("Refresh recorded %d %+v", b.Limit, b.Grants)
	}
}
