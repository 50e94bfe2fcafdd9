package ledger_test

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

func TestObserveFoldsAndExpiresInTheSameWrite(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	mustReserve(t, f, claim("appeared", req(project("p"), rtProjects, 2, nil)))
	mustReserve(t, f, claim("never", req(project("p"), rtProjects, 3, nil)))
	mustReserve(t, f, claim("pending", req(project("p"), rtProjects, 1, nil)))

	counting := &countingStore{Store: f.store, writes: map[ledger.BucketKey]int{}}
	f.ledger = ledger.New(counting, f.grants, ledger.WithClock(f.clock.Now))
	obs := ledger.Observation{
		Allocated:   6,
		ByNamespace: map[string]int64{"": 1, "team-a": 5},
		Count:       3,
		Fold:        []string{"appeared", "absent"},
		Expire:      []string{"never", "also-absent"},
	}
	got := mustObserve(t, f, projectsKey, obs)
	want := ledger.Bucket{
		Key: projectsKey, Limit: 10, Grants: []ledger.GrantContribution{{GrantID: "ns/g#0", Amount: 10, Generation: 1}},
		Allocated: 6, ByNamespace: map[string]int64{"": 1, "team-a": 5}, Count: 3,
		Reservations: map[string]ledger.Reservation{"pending": {
			ClaimID: "pending", Object: claim("pending").Object, Amount: 1, ExpiresAt: t0.Add(ledger.DefaultReservationTTL),
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("observed bucket (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[ledger.BucketKey]int{projectsKey: 1}, counting.writes); diff != "" {
		t.Fatalf("writes (-want +got):\n%s", diff)
	}
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 10, Allocated: 6, Reserved: 1, Available: 3})

	// The same observation again finds nothing to change and writes nothing;
	// the caller still gets the bucket.
	again := mustObserve(t, f, projectsKey, obs)
	if diff := cmp.Diff(want, again); diff != "" {
		t.Fatalf("unchanged observation returned (-want +got):\n%s", diff)
	}
	if counting.writes[projectsKey] != 1 {
		t.Fatalf("unchanged observation wrote: %d writes", counting.writes[projectsKey])
	}
}

// The observer names the reservations it folds; one made after it looked
// (not named) keeps holding its quota.
func TestObserveKeepsReservationsItDoesNotName(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	mustReserve(t, f, claim("late", req(project("p"), rtProjects, 4, nil)))
	mustObserve(t, f, projectsKey, observed(2))
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 10, Allocated: 2, Reserved: 4, Available: 4})
}

// A reservation the observer did not name (its cached copy of the bucket
// lagged) whose object it counts is folded all the same: the object is never
// in allocated beside its own reservation. An update's growth is folded only
// once the object is counted at that generation; others stay.
func TestObserveFoldsWhatItCountsUnnamed(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	mustReserve(t, f, claim("uid-a", req(project("p"), rtProjects, 2, nil)))
	mustReserve(t, f, claim("uid-b/3/1", req(project("p"), rtProjects, 1, nil)))
	mustReserve(t, f, claim("uid-c/2/1", req(project("p"), rtProjects, 1, nil)))
	mustReserve(t, f, claim("uid-d", req(project("p"), rtProjects, 3, nil)))
	obs := observed(5)
	obs.Count = 3
	obs.Counted = map[string]ledger.CountedAt{"uid-a": {Amount: 2}, "uid-b": {Generation: 2, Amount: 1}, "uid-c": {Generation: 2, Amount: 1}}
	b := mustObserve(t, f, projectsKey, obs)
	if diff := cmp.Diff([]string{"uid-b/3/1", "uid-d"}, slices.Sorted(maps.Keys(b.Reservations))); diff != "" {
		t.Fatalf("reservations left (-want +got):\n%s", diff)
	}
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 10, Allocated: 5, Reserved: 4, Available: 1})
}

// An update's growth reservation stands for the object at the amount the
// update asks for (Request.Total). A kind without metadata.generation keeps
// generation 0 through every update, so the generation alone cannot tell an
// update in flight from one in place: the growth of 1 to 9 ("uid-a/0/8") is
// folded only once the object counts 9 or more, and an object still counted
// at 1 keeps it reserved (issue 22, case 1: folding it at once let another
// create take the same 8).
func TestObserveFoldsAnUpdateOnlyAtTheAmountItAskedFor(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	growth := req(project("p"), rtProjects, 8, nil)
	growth.Total = 9
	mustReserve(t, f, claim("uid-a/0/8", growth))
	obs := observed(1)
	obs.Counted = map[string]ledger.CountedAt{"uid-a": {Amount: 1}}
	b := mustObserve(t, f, projectsKey, obs)
	if r, ok := b.Reservations["uid-a/0/8"]; !ok || r.Total != 9 {
		t.Fatalf("reservations %+v, want uid-a/0/8 kept with total 9 while the object counts 1", b.Reservations)
	}
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 10, Allocated: 1, Reserved: 8, Available: 1})

	obs = observed(9)
	obs.Counted = map[string]ledger.CountedAt{"uid-a": {Amount: 9}}
	if b := mustObserve(t, f, projectsKey, obs); len(b.Reservations) != 0 {
		t.Fatalf("reservations %+v, want none once the object counts 9", b.Reservations)
	}
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 10, Allocated: 9, Available: 1})
}

// Two updates of a kind without metadata.generation that grow the object
// by the same amount one after the other, a 1 -> 4 and 4 -> 7, ask under
// the same claim id, "uid-a/0/3". The second is a later update, not a
// replay: its growth is reserved beside the first's (refused when it does
// not fit), and the one reservation is folded only once the object counts
// 7. Taken for a replay, it reserved nothing, the observer folded the
// reservation at 4, and a create took the 3 units the second was about to
// use (13 of 10).
func TestALaterUpdateUnderTheSameClaimIDIsReservedToo(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	growth := func(total int64) ledger.Claim {
		r := req(project("p"), rtProjects, 3, nil)
		r.Total = total
		return claim("uid-a/0/3", r)
	}
	obs := observed(1)
	obs.Counted = map[string]ledger.CountedAt{"uid-a": {Amount: 1}}
	mustObserve(t, f, projectsKey, obs)
	mustReserve(t, f, growth(4))
	// A replay of the first (Gatekeeper's retry, another replica) holds
	// nothing more.
	mustReserve(t, f, growth(4))
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 10, Allocated: 1, Reserved: 3, Available: 6})
	if d := mustReserve(t, f, growth(7)); !d.Granted {
		t.Fatalf("the later update denied: %s", d.Message())
	}
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 10, Allocated: 1, Reserved: 6, Available: 3})

	// The observer counts the object at 4: the first is in place, the
	// second still in flight, so 3 stay reserved for it.
	obs = observed(4)
	obs.Counted = map[string]ledger.CountedAt{"uid-a": {Amount: 4}}
	b := mustObserve(t, f, projectsKey, obs)
	if r, ok := b.Reservations["uid-a/0/3"]; !ok || r.Amount != 6 || r.Total != 7 {
		t.Fatalf("reservations %+v, want uid-a/0/3 of 6 with total 7 while the object counts 4", b.Reservations)
	}
	if d := mustReserve(t, f, claim("uid-b", req(project("p"), rtProjects, 6, nil))); d.Granted {
		t.Fatalf("a create of 6 granted while a grows from 4 to 7 under 10")
	}
	// A third, to 10 from 7, does not fit beside them: refused, and the
	// reservation is left as it was.
	if d := mustReserve(t, f, growth(10)); d.Granted {
		t.Fatalf("a third update granted past the limit: %s", d.Message())
	}
	obs = observed(7)
	obs.Counted = map[string]ledger.CountedAt{"uid-a": {Amount: 7}}
	if b := mustObserve(t, f, projectsKey, obs); len(b.Reservations) != 0 {
		t.Fatalf("reservations %+v, want none once the object counts 7", b.Reservations)
	}
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 10, Allocated: 7, Available: 3})
}

func TestReservationFoldedBy(t *testing.T) {
	for _, tc := range []struct {
		r       ledger.Reservation
		counted ledger.CountedAt
		want    bool
	}{
		{ledger.Reservation{ClaimID: "u"}, ledger.CountedAt{}, true},
		{ledger.Reservation{ClaimID: "u/3/2", Total: 5}, ledger.CountedAt{Generation: 2, Amount: 5}, false},
		{ledger.Reservation{ClaimID: "u/3/2", Total: 5}, ledger.CountedAt{Generation: 3, Amount: 4}, false},
		{ledger.Reservation{ClaimID: "u/3/2", Total: 5}, ledger.CountedAt{Generation: 3, Amount: 5}, true},
		{ledger.Reservation{ClaimID: "u/3/2", Total: 5}, ledger.CountedAt{Generation: 4, Amount: 7}, true},
		{ledger.Reservation{ClaimID: "u/0/8", Total: 9}, ledger.CountedAt{Amount: 1}, false},
		// Written before Total existed: the generation alone decides.
		{ledger.Reservation{ClaimID: "u/3/2"}, ledger.CountedAt{Generation: 3, Amount: 1}, true},
	} {
		if got := tc.r.FoldedBy(tc.counted); got != tc.want {
			t.Errorf("%+v.FoldedBy(%+v) = %v, want %v", tc.r, tc.counted, got, tc.want)
		}
	}
}

func TestObserveRecomputesTheLimit(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	mustObserve(t, f, projectsKey, observed(3))
	f.grant(t, "ns/g#0", project("p"), rtProjects, 2, nil)
	b := mustObserve(t, f, projectsKey, observed(3))
	if b.Limit != 2 || b.Grants[0].Amount != 2 {
		t.Fatalf("limit %d grants %+v, want 2 from the lowered grant", b.Limit, b.Grants)
	}
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 2, Allocated: 3})
}

func TestObservingNothingCreatesNoBucket(t *testing.T) {
	f := newFixture(t)
	b := mustObserve(t, f, projectsKey, ledger.Observation{Fold: []string{"x"}, Expire: []string{"y"}})
	if diff := cmp.Diff(ledger.Bucket{Key: projectsKey}, b); diff != "" {
		t.Fatalf("returned (-want +got):\n%s", diff)
	}
	if list := snapshot(t, f); len(list) != 0 {
		t.Fatalf("observing nothing created %+v", list)
	}
}

func TestObserveValidation(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 10, nil)
	mustReserve(t, f, claim("r", req(project("p"), rtProjects, 2, nil)))
	before := snapshot(t, f)
	for _, tc := range []struct {
		name     string
		obs      ledger.Observation
		want     string
		overflow bool
	}{
		{"negative allocated", ledger.Observation{Allocated: -1}, "allocated: must not be negative, got -1", false},
		{"negative count", ledger.Observation{Count: -1}, "count: must not be negative, got -1", false},
		{"negative namespace", ledger.Observation{Allocated: 1, ByNamespace: map[string]int64{"a": 2, "b": -1}, Count: 2},
			"byNamespace[b]: must not be negative, got -1", false},
		{"split not summing", ledger.Observation{Allocated: 5, ByNamespace: map[string]int64{"a": 2, "b": 2}, Count: 2, Fold: []string{"r"}},
			"byNamespace: sums to 4, want allocated 5", false},
		{"split missing", ledger.Observation{Allocated: 5, Count: 1}, "byNamespace: sums to 0, want allocated 5", false},
		{"split overflows", ledger.Observation{Allocated: 1, ByNamespace: map[string]int64{"a": math.MaxInt64, "b": 1}, Count: 2},
			"byNamespace: sum: int64 overflow: 9223372036854775807 + 1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.ledger.Observe(f.ctx, projectsKey, tc.obs)
			var verr *ledger.ValidationError
			if !errors.As(err, &verr) || !errors.Is(err, ledger.ErrInvalid) || err.Error() != tc.want || errors.Is(err, ledger.ErrOverflow) != tc.overflow {
				t.Fatalf("err = %v, want ValidationError %q (overflow %v)", err, tc.want, tc.overflow)
			}
			if diff := cmp.Diff(before, snapshot(t, f)); diff != "" {
				t.Fatalf("invalid observation changed state (-before +after):\n%s", diff)
			}
		})
	}
}

func TestReservationForNamesTheObjectAndGeneration(t *testing.T) {
	for _, tc := range []struct {
		id         string
		uid        string
		generation int64
		update     bool
	}{
		{"uid-1", "uid-1", 0, false},
		{"uid-1/7/500", "uid-1", 7, true},
		{"uid-1/0/1", "uid-1", 0, true},
		{"uid-1/x/1", "uid-1/x/1", 0, false},
	} {
		uid, g, update := ledger.ReservationFor(tc.id)
		if uid != tc.uid || g != tc.generation || update != tc.update {
			t.Errorf("ReservationFor(%q) = %q, %d, %v; want %q, %d, %v", tc.id, uid, g, update, tc.uid, tc.generation, tc.update)
		}
	}
}

// While an observer rebuilds, a create reservation it finds is folded on
// top of the figures as last written: its presence proves the object is
// not in them. An update's growth, an object counted below its
// reservation, and a reservation the bucket does not hold are left alone;
// the limit stays as stored.
func TestFoldCreatedAddsOnlyWhatACreateReservationProves(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/g#0", project("p"), rtProjects, 20, nil)
	mustObserve(t, f, projectsKey, ledger.Observation{Allocated: 5, ByNamespace: map[string]int64{"team-a": 5}, Count: 5})
	mustReserve(t, f, claim("created", req(project("p"), rtProjects, 2, nil)))
	mustReserve(t, f, claim("uid-grown/3/1", req(project("p"), rtProjects, 1, nil)))
	mustReserve(t, f, claim("small", ledger.Request{Consumer: project("p"), ResourceType: rtProjects, Amount: 4, Total: 4}))
	mustReserve(t, f, claim("never", req(project("p"), rtProjects, 3, nil)))

	got, err := f.ledger.FoldCreated(context.Background(), projectsKey, []ledger.Created{
		{UID: "created", Generation: 1, Namespace: "team-b", Amount: 2},
		{UID: "uid-grown/3/1", Generation: 3, Namespace: "team-a", Amount: 7},
		{UID: "small", Generation: 1, Namespace: "team-a", Amount: 3},
		{UID: "absent", Generation: 1, Namespace: "team-a", Amount: 9},
	}, []string{"never", "also-absent"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Allocated != 7 || got.Count != 6 || !maps.Equal(got.ByNamespace, map[string]int64{"team-a": 5, "team-b": 2}) {
		t.Fatalf("allocated %d count %d byNamespace %v, want 7, 6 and team-a 5, team-b 2", got.Allocated, got.Count, got.ByNamespace)
	}
	if ids := slices.Sorted(maps.Keys(got.Reservations)); !slices.Equal(ids, []string{"small", "uid-grown/3/1"}) {
		t.Fatalf("reservations %v, want small and uid-grown/3/1", ids)
	}
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 20, Allocated: 7, Reserved: 5, Available: 8})

	// A negative amount is refused and changes nothing.
	_, err = f.ledger.FoldCreated(context.Background(), projectsKey, []ledger.Created{{UID: "small", Amount: -1}}, nil)
	var verr *ledger.ValidationError
	if !errors.As(err, &verr) || verr.Error() == "" || !strings.Contains(err.Error(), "created[0].amount: must not be negative, got -1") {
		t.Fatalf("negative amount: %v", err)
	}
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 20, Allocated: 7, Reserved: 5, Available: 8})
}
