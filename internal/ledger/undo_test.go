package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

func mustReserveUndoable(t *testing.T, f *fixture, c ledger.Claim) (ledger.Decision, ledger.Taken) {
	t.Helper()
	d, taken, err := f.ledger.ReserveUndoable(f.ctx, c)
	if err != nil {
		t.Fatalf("reserve %s: %v", c.ID, err)
	}
	return d, taken
}

func mustUndo(t *testing.T, f *fixture, taken ledger.Taken) {
	t.Helper()
	if err := f.ledger.Undo(f.ctx, taken); err != nil {
		t.Fatalf("undo %s: %v", taken.ClaimID(), err)
	}
}

// A claim granted over two buckets and then undone (the admission review
// that reserved it was denied) leaves both buckets as they were, and an
// Undo repeated changes nothing.
func TestUndoGivesBackEveryBucketTheCallTook(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	f.grant(t, "ns/o#0", org("o"), rtProjects, 3, nil)
	pKey, oKey := ledger.NewBucketKey(project("p"), rtProjects, nil), ledger.NewBucketKey(org("o"), rtProjects, nil)
	// Another object's reservation in each bucket stays through the undo.
	mustReserve(t, f, claim("other", req(project("p"), rtProjects, 1, nil), req(org("o"), rtProjects, 1, nil)))
	before := snapshot(t, f)

	d, taken := mustReserveUndoable(t, f, claim("c", req(project("p"), rtProjects, 2, nil), req(org("o"), rtProjects, 2, nil)))
	if !d.Granted || taken.Empty() || taken.ClaimID() != "c" {
		t.Fatalf("granted %v, taken empty %v (%q), want granted and taken c", d.Granted, taken.Empty(), taken.ClaimID())
	}
	f.wantUsage(t, oKey, ledger.Usage{Limit: 3, Reserved: 3, Available: 0})

	mustUndo(t, f, taken)
	if diff := cmp.Diff(before, snapshot(t, f)); diff != "" {
		t.Fatalf("undo left (-before +after):\n%s", diff)
	}
	f.wantUsage(t, pKey, ledger.Usage{Limit: 10, Reserved: 1, Available: 9})
	f.wantUsage(t, oKey, ledger.Usage{Limit: 3, Reserved: 1, Available: 2})
	mustUndo(t, f, taken)
	if diff := cmp.Diff(before, snapshot(t, f)); diff != "" {
		t.Fatalf("a second undo changed (-before +after):\n%s", diff)
	}
}

// A denied claim and a replay add nothing: their Taken is empty, and
// undoing it never removes the reservation an earlier call holds under the
// same ID.
func TestUndoOfAReplayOrADenialRemovesNothing(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 3, nil)
	c := claim("c", req(project("p"), rtProjects, 2, nil))
	if _, first := mustReserveUndoable(t, f, c); first.Empty() {
		t.Fatal("the first reserve took nothing")
	}
	held := snapshot(t, f)

	f.clock.now = f.clock.now.Add(time.Second)
	d, replay := mustReserveUndoable(t, f, c)
	if !d.Granted || !replay.Empty() {
		t.Fatalf("replay: granted %v, taken empty %v; want granted, nothing taken", d.Granted, replay.Empty())
	}
	mustUndo(t, f, replay)

	d, denied := mustReserveUndoable(t, f, claim("d", req(project("p"), rtProjects, 2, nil)))
	if d.Granted || !denied.Empty() {
		t.Fatalf("over the limit: granted %v, taken empty %v; want denied, nothing taken", d.Granted, denied.Empty())
	}
	mustUndo(t, f, denied)
	if diff := cmp.Diff(held, snapshot(t, f)); diff != "" {
		t.Fatalf("undoing a replay and a denial changed (-before +after):\n%s", diff)
	}
}

// Undo knows a call's reservation by its expiry. Once the observer has
// folded it, a later call that reserves under the same ID again holds a
// reservation of its own, which an undo of the first call must leave.
func TestUndoLeavesALaterCallsReservationUnderTheSameID(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	pKey := ledger.NewBucketKey(project("p"), rtProjects, nil)
	c := claim("c", req(project("p"), rtProjects, 2, nil))
	_, first := mustReserveUndoable(t, f, c)
	mustObserve(t, f, pKey, observed(2, "c"))
	f.clock.now = f.clock.now.Add(time.Second)
	_, second := mustReserveUndoable(t, f, c)
	if second.Empty() {
		t.Fatal("the reserve after the fold took nothing")
	}
	f.wantUsage(t, pKey, ledger.Usage{Limit: 10, Allocated: 2, Reserved: 2, Available: 6})

	mustUndo(t, f, first)
	f.wantUsage(t, pKey, ledger.Usage{Limit: 10, Allocated: 2, Reserved: 2, Available: 6})
	mustUndo(t, f, second)
	f.wantUsage(t, pKey, ledger.Usage{Limit: 10, Allocated: 2, Reserved: 0, Available: 8})
}

// A claim over two buckets of which one already held the ID (an earlier
// claim under it) takes only the other; its undo gives back only that one.
func TestUndoGivesBackOnlyTheBucketsTheCallAdded(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	f.grant(t, "ns/o#0", org("o"), rtProjects, 10, nil)
	pKey, oKey := ledger.NewBucketKey(project("p"), rtProjects, nil), ledger.NewBucketKey(org("o"), rtProjects, nil)
	mustReserve(t, f, claim("c", req(project("p"), rtProjects, 2, nil)))
	f.clock.now = f.clock.now.Add(time.Second)
	_, taken := mustReserveUndoable(t, f, claim("c", req(project("p"), rtProjects, 2, nil), req(org("o"), rtProjects, 2, nil)))
	f.wantUsage(t, oKey, ledger.Usage{Limit: 10, Reserved: 2, Available: 8})

	mustUndo(t, f, taken)
	f.wantUsage(t, pKey, ledger.Usage{Limit: 10, Reserved: 2, Available: 8})
	f.wantUsage(t, oKey, ledger.Usage{Limit: 10, Reserved: 0, Available: 10})
}

// Unlike a denied claim's rollback, Undo gives up when its context ends:
// the reservation then stays, to expire as any other.
func TestUndoHonoursItsContext(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	pKey := ledger.NewBucketKey(project("p"), rtProjects, nil)
	_, taken := mustReserveUndoable(t, f, claim("c", req(project("p"), rtProjects, 2, nil)))
	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	if err := f.ledger.Undo(ctx, taken); err == nil {
		t.Fatal("undo under an ended context: no error")
	}
	f.wantUsage(t, pKey, ledger.Usage{Limit: 10, Reserved: 2, Available: 8})
}

// Two constraints count one object into one bucket, the second for more:
// its call grows the reservation, and undoing that call (its review was
// denied by a third) puts back the first call's reservation as it was, not
// nothing: the first call's object may still be admitted.
func TestUndoOfAGrownReservationPutsTheSmallerOneBack(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	mustReserve(t, f, claim("c", req(project("p"), rtProjects, 2, nil)))
	before := snapshot(t, f)

	f.clock.now = f.clock.now.Add(time.Second)
	d, taken := mustReserveUndoable(t, f, claim("c", req(project("p"), rtProjects, 5, nil)))
	if !d.Granted || taken.Empty() {
		t.Fatalf("granted %v, taken empty %v: want the reservation grown", d.Granted, taken.Empty())
	}
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 10, Reserved: 5, Available: 5})
	mustUndo(t, f, taken)
	if diff := cmp.Diff(before, snapshot(t, f)); diff != "" {
		t.Fatalf("undo of the growth left (-before +after):\n%s", diff)
	}
}
