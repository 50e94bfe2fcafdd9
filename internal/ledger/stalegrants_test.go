package ledger_test

import (
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// Two writers share one store, as Gatekeeper's replicas and the manager
// share the API server, each deciding from a grant cache of its own. Once
// the bucket records a lowered grant (the leader's Refresh), a writer
// whose cache still has the old grant is held to the lowered limit and
// cannot write the old limit back; a raised grant binds once the bucket
// records it. (The window the model found: docs/design/model.md, "A
// lowered grant".)
func TestAWriterWithAStaleGrantCacheIsHeldToTheRecordedLimit(t *testing.T) {
	leader := newFixture(t)
	staleCache := ledger.NewGrantSet()
	stale := ledger.New(leader.store, staleCache, ledger.WithClock(leader.clock.Now))
	staleGrants := func(amount int64) {
		t.Helper()
		g := ledger.Grant{ID: "ns/g#0", Generation: amount, Consumer: project("p"), ResourceType: rtProjects, Amount: amount}
		if err := staleCache.Set(g); err != nil {
			t.Fatal(err)
		}
	}
	set := func(amount int64) {
		t.Helper()
		g := ledger.Grant{ID: "ns/g#0", Generation: amount, Consumer: project("p"), ResourceType: rtProjects, Amount: amount}
		if err := leader.grants.Set(g); err != nil {
			t.Fatal(err)
		}
		if _, err := leader.ledger.Refresh(leader.ctx, projectsKey); err != nil {
			t.Fatal(err)
		}
	}
	set(3)
	staleGrants(3)
	if d := mustReserveOn(t, stale, leader, claim("a", req(project("p"), rtProjects, 1, nil))); !d.Granted {
		t.Fatalf("within the grant: denied: %s", d.Message())
	}

	// Lowered to 1; the stale writer's cache still says 3.
	set(1)
	d := mustReserveOn(t, stale, leader, claim("b", req(project("p"), rtProjects, 1, nil)))
	if d.Granted {
		t.Fatal("a writer with the old grant in its cache was granted past the lowered limit the bucket records")
	}
	if got, want := d.Message(), "requested 1 of resourcemanager.miloapis.com/projects, available 0 of 1 (allocated 0, reserved 1)"; got != want {
		t.Errorf("denial %q, want %q", got, want)
	}
	leader.wantUsage(t, projectsKey, ledger.Usage{Limit: 1, Allocated: 0, Reserved: 1, Available: 0})
	// Its releasing write leaves the recorded limit alone too.
	if err := stale.Release(leader.ctx, claim("a", req(project("p"), rtProjects, 1, nil))); err != nil {
		t.Fatal(err)
	}
	leader.wantUsage(t, projectsKey, ledger.Usage{Limit: 1, Allocated: 0, Reserved: 0, Available: 1})

	// Raised to 5: a writer whose cache has the raise is held to the
	// recorded 1 until the leader records 5.
	staleGrants(5)
	for _, id := range []string{"c", "d"} {
		d := mustReserveOn(t, stale, leader, claim(id, req(project("p"), rtProjects, 1, nil)))
		if want := id == "c"; d.Granted != want {
			t.Fatalf("raised in the cache, not yet recorded: claim %s granted %t, want %t (%s)", id, d.Granted, want, d.Message())
		}
	}
	set(5)
	if d := mustReserveOn(t, stale, leader, claim("d", req(project("p"), rtProjects, 1, nil))); !d.Granted {
		t.Fatalf("raised and recorded: denied: %s", d.Message())
	}
	leader.wantUsage(t, projectsKey, ledger.Usage{Limit: 5, Allocated: 0, Reserved: 2, Available: 3})
}

func mustReserveOn(t *testing.T, l *ledger.Ledger, f *fixture, c ledger.Claim) ledger.Decision {
	t.Helper()
	d, err := l.Reserve(f.ctx, c)
	if err != nil {
		t.Fatalf("reserve %s: %v", c.ID, err)
	}
	return d
}
