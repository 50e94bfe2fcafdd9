package counting

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

var (
	teamA = ledger.NewBucketKey(ledger.Consumer{Kind: "Namespace", Name: "team-a"}, "core/configmaps", nil)
	teamB = ledger.NewBucketKey(ledger.Consumer{Kind: "Namespace", Name: "team-b"}, "core/configmaps", nil)
	acme  = ledger.NewBucketKey(ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}, "core/configmaps", nil)
)

func obj(uid string, generation int64, ns string, amounts map[ledger.BucketKey]int64) Object {
	return Object{UID: uid, Generation: generation, Namespace: ns, Amounts: amounts}
}

func observation(t *testing.T, tl *Tally, key ledger.BucketKey) ledger.Observation {
	t.Helper()
	obs, err := tl.Observation(key)
	if err != nil {
		t.Fatal(err)
	}
	return obs
}

func TestTallySumsMovesAndForgets(t *testing.T) {
	tl := NewTally()
	type step struct {
		name    string
		do      func() []ledger.BucketKey
		changed []ledger.BucketKey
		want    map[ledger.BucketKey]ledger.Observation
	}
	for _, s := range []step{
		{
			name: "two objects in team-a, one also in acme",
			do: func() []ledger.BucketKey {
				return tl.Set("cm/a/1", obj("u1", 1, "team-a", map[ledger.BucketKey]int64{teamA: 1, acme: 1}))
			},
			changed: []ledger.BucketKey{teamA, acme},
			want: map[ledger.BucketKey]ledger.Observation{
				teamA: {Allocated: 1, Count: 1, ByNamespace: map[string]int64{"team-a": 1}, Counted: map[string]ledger.CountedAt{"u1": {Generation: 1, Amount: 1}}},
				acme:  {Allocated: 1, Count: 1, ByNamespace: map[string]int64{"team-a": 1}, Counted: map[string]ledger.CountedAt{"u1": {Generation: 1, Amount: 1}}},
			},
		},
		{
			name: "a second object",
			do: func() []ledger.BucketKey {
				return tl.Set("cm/a/2", obj("u2", 1, "team-a", map[ledger.BucketKey]int64{teamA: 3}))
			},
			changed: []ledger.BucketKey{teamA},
			want: map[ledger.BucketKey]ledger.Observation{
				teamA: {Allocated: 4, Count: 2, ByNamespace: map[string]int64{"team-a": 4}, Counted: map[string]ledger.CountedAt{"u1": {Generation: 1, Amount: 1}, "u2": {Generation: 1, Amount: 3}}},
			},
		},
		{
			name: "re-evaluating the same thing changes nothing",
			do: func() []ledger.BucketKey {
				return tl.Set("cm/a/2", obj("u2", 1, "team-a", map[ledger.BucketKey]int64{teamA: 3}))
			},
			changed: nil,
		},
		{
			name: "relabelling moves u1 from acme to team-b",
			do: func() []ledger.BucketKey {
				return tl.Set("cm/a/1", obj("u1", 1, "team-a", map[ledger.BucketKey]int64{teamA: 1, teamB: 2}))
			},
			changed: []ledger.BucketKey{teamB, acme},
			want: map[ledger.BucketKey]ledger.Observation{
				acme:  {},
				teamB: {Allocated: 2, Count: 1, ByNamespace: map[string]int64{"team-a": 2}, Counted: map[string]ledger.CountedAt{"u1": {Generation: 1, Amount: 2}}},
			},
		},
		{
			name: "an amount changes",
			do: func() []ledger.BucketKey {
				return tl.Set("cm/a/2", obj("u2", 2, "team-a", map[ledger.BucketKey]int64{teamA: 5}))
			},
			changed: []ledger.BucketKey{teamA},
			want: map[ledger.BucketKey]ledger.Observation{
				teamA: {Allocated: 6, Count: 2, ByNamespace: map[string]int64{"team-a": 6}, Counted: map[string]ledger.CountedAt{"u1": {Generation: 1, Amount: 1}, "u2": {Generation: 2, Amount: 5}}},
			},
		},
		{
			name:    "an object that counts nothing any more",
			do:      func() []ledger.BucketKey { return tl.Set("cm/a/1", obj("u1", 1, "team-a", nil)) },
			changed: []ledger.BucketKey{teamA, teamB},
			want: map[ledger.BucketKey]ledger.Observation{
				teamA: {Allocated: 5, Count: 1, ByNamespace: map[string]int64{"team-a": 5}, Counted: map[string]ledger.CountedAt{"u2": {Generation: 2, Amount: 5}}},
				teamB: {},
			},
		},
		{
			name:    "a delete returns everything",
			do:      func() []ledger.BucketKey { return tl.Remove("cm/a/2") },
			changed: []ledger.BucketKey{teamA},
			want:    map[ledger.BucketKey]ledger.Observation{teamA: {}},
		},
		{
			name:    "deleting what is not there changes nothing",
			do:      func() []ledger.BucketKey { return tl.Remove("cm/a/9") },
			changed: nil,
		},
	} {
		got := s.do()
		if diff := cmp.Diff(s.changed, got, cmpopts.SortSlices(func(a, b ledger.BucketKey) bool { return CompareKeys(a, b) < 0 })); diff != "" {
			t.Errorf("%s: changed buckets (-want +got):\n%s", s.name, diff)
		}
		for key, want := range s.want {
			if diff := cmp.Diff(want, observation(t, tl, key), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: %s (-want +got):\n%s", s.name, key, diff)
			}
		}
	}
	if got := tl.Buckets(); len(got) != 0 {
		t.Errorf("buckets left: %v", got)
	}
}

func TestTallySplitsByNamespace(t *testing.T) {
	tl := NewTally()
	tl.Set("a", obj("u1", 0, "team-a", map[ledger.BucketKey]int64{acme: 2}))
	tl.Set("b", obj("u2", 0, "team-b", map[ledger.BucketKey]int64{acme: 3}))
	tl.Set("c", obj("u3", 0, "", map[ledger.BucketKey]int64{acme: 1}))
	want := ledger.Observation{Allocated: 6, Count: 3, ByNamespace: map[string]int64{"team-a": 2, "team-b": 3, "": 1},
		Counted: map[string]ledger.CountedAt{"u1": {Amount: 2}, "u2": {Amount: 3}, "u3": {Amount: 1}}}
	if diff := cmp.Diff(want, observation(t, tl, acme)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestTallyRefusesAnOverflowingSum(t *testing.T) {
	tl := NewTally()
	tl.Set("a", obj("u1", 0, "team-a", map[ledger.BucketKey]int64{teamA: 1<<63 - 1}))
	tl.Set("b", obj("u2", 0, "team-a", map[ledger.BucketKey]int64{teamA: 1}))
	if _, err := tl.Observation(teamA); err == nil {
		t.Fatal("no error for a sum beyond int64")
	}
	// Once the object that overflowed it goes, the sum is exact again.
	tl.Remove("b")
	want := ledger.Observation{Allocated: 1<<63 - 1, Count: 1, ByNamespace: map[string]int64{"team-a": 1<<63 - 1}, Counted: map[string]ledger.CountedAt{"u1": {Amount: 1<<63 - 1}}}
	if diff := cmp.Diff(want, observation(t, tl, teamA)); diff != "" {
		t.Errorf("after the removal (-want +got):\n%s", diff)
	}
}

// The figures kept as objects come, change, move and go equal a recount of
// the members, and an Observation is a copy the tally's changes leave alone.
func TestTallyFiguresFollowEveryChange(t *testing.T) {
	tl := NewTally()
	rng := rand.New(rand.NewPCG(1, 2))
	namespaces := []string{"team-a", "team-b", ""}
	var held, heldCopy ledger.Observation
	live := map[string]Object{} // what was set last under each ref: the recount's input
	for i := range 5000 {
		ref := fmt.Sprint("o", rng.IntN(200))
		if rng.IntN(4) == 0 {
			tl.Remove(ref)
			delete(live, ref)
		} else {
			amounts := map[ledger.BucketKey]int64{}
			if rng.IntN(3) > 0 {
				amounts[acme] = 1 + rng.Int64N(5)
			}
			live[ref] = obj("uid-"+ref, int64(i), namespaces[rng.IntN(3)], amounts)
			tl.Set(ref, live[ref])
		}
		got := observation(t, tl, acme)
		var want ledger.Observation
		if diff := cmp.Diff(slices.Sorted(maps.Keys(live)), tl.Refs(), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("after change %d, refs (-set +held):\n%s", i, diff)
		}
		for _, o := range live {
			if a := o.Amounts[acme]; a > 0 {
				if want.ByNamespace == nil {
					want.ByNamespace, want.Counted = map[string]int64{}, map[string]ledger.CountedAt{}
				}
				want.Allocated += a
				want.Count++
				want.ByNamespace[o.Namespace] += a
				want.Counted[o.UID] = ledger.CountedAt{Generation: o.Generation, Amount: a}
			}
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("after change %d (-recount +kept):\n%s", i, diff)
		}
		if i == 100 {
			held = got
			heldCopy = got
			heldCopy.ByNamespace, heldCopy.Counted = maps.Clone(got.ByNamespace), maps.Clone(got.Counted)
		}
	}
	if diff := cmp.Diff(heldCopy, held); diff != "" {
		t.Fatalf("an observation taken earlier changed under its holder (-then +now):\n%s", diff)
	}
}

func TestAmounts(t *testing.T) {
	a := ledger.Consumer{Kind: "Namespace", Name: "team-a"}
	org := ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}
	req := func(c ledger.Consumer, n int64) ledger.Request {
		return ledger.Request{Consumer: c, ResourceType: "core/configmaps", Amount: n}
	}
	for _, tc := range []struct {
		name   string
		claims []ledger.Claim
		want   map[ledger.BucketKey]int64
	}{
		{"no claims count nothing", nil, map[ledger.BucketKey]int64{}},
		{"one claim, two consumers", []ledger.Claim{{ID: "u", Requests: []ledger.Request{req(a, 1), req(org, 1)}}},
			map[ledger.BucketKey]int64{teamA: 1, acme: 1}},
		{"requests for one bucket in a claim add up", []ledger.Claim{{ID: "u", Requests: []ledger.Request{req(a, 1), req(a, 2)}}},
			map[ledger.BucketKey]int64{teamA: 3}},
		{"across claims the largest counts", []ledger.Claim{
			{ID: "u", Requests: []ledger.Request{req(a, 2)}},
			{ID: "u", Requests: []ledger.Request{req(a, 5), req(org, 1)}},
			{ID: "u", Requests: []ledger.Request{req(a, 3)}},
		}, map[ledger.BucketKey]int64{teamA: 5, acme: 1}},
		{"non-positive amounts count nothing", []ledger.Claim{{ID: "u", Requests: []ledger.Request{req(a, 0), req(org, -1)}}},
			map[ledger.BucketKey]int64{}},
	} {
		got, err := Amounts(tc.claims)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestPlanReservations(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	later, earlier, soon := now.Add(time.Minute), now.Add(-time.Second), now.Add(10*time.Second)
	res := func(id string, expires time.Time) ledger.Reservation {
		return ledger.Reservation{ClaimID: id, Amount: 1, ExpiresAt: expires}
	}
	total := func(r ledger.Reservation, n int64) ledger.Reservation {
		r.Total = n
		return r
	}
	tl := NewTally()
	tl.Set("counted", obj("counted", 3, "team-a", map[ledger.BucketKey]int64{teamA: 1}))
	tl.Set("elsewhere", obj("elsewhere", 2, "team-a", map[ledger.BucketKey]int64{teamB: 1}))
	tl.Set("nothing", obj("nothing", 1, "team-a", nil))
	for _, tc := range []struct {
		name string
		res  []ledger.Reservation
		want Plan
	}{
		{"a create's reservation of a counted object folds, expired or not",
			[]ledger.Reservation{res("counted", later)}, Plan{Fold: []string{"counted"}}},
		{"an update's reservation folds once its generation is counted",
			[]ledger.Reservation{res("counted/2/1", later), res("counted/3/1", later)}, Plan{Fold: []string{"counted/2/1", "counted/3/1"}}},
		{"an update's reservation folds only once the object counts its total",
			[]ledger.Reservation{total(res("counted/3/1", later), 1), total(res("counted/3/2", soon), 3)},
			Plan{Fold: []string{"counted/3/1"}, Next: soon}},
		{"an update's reservation for a later generation waits",
			[]ledger.Reservation{res("counted/4/1", later), res("counted/5/1", soon)}, Plan{Next: soon}},
		{"an expired update's reservation for a generation not seen is looked up",
			[]ledger.Reservation{res("counted/4/1", earlier)}, Plan{Check: []ledger.Reservation{res("counted/4/1", earlier)}}},
		{"an id of another shape never folds: it waits, then is looked up",
			[]ledger.Reservation{res("counted/req-1", later), res("counted/req-2", earlier)}, Plan{Check: []ledger.Reservation{res("counted/req-2", earlier)}, Next: later}},
		{"an unknown object's reservation waits until it expires",
			[]ledger.Reservation{res("unknown", later)}, Plan{Next: later}},
		{"an expired reservation of an unknown object is looked up",
			[]ledger.Reservation{res("unknown", earlier)}, Plan{Check: []ledger.Reservation{res("unknown", earlier)}}},
		{"an expired reservation of an object counted elsewhere or nowhere expires",
			[]ledger.Reservation{res("elsewhere", earlier), res("nothing", earlier), res("nothing/1/1", earlier)},
			Plan{Expire: []string{"elsewhere", "nothing", "nothing/1/1"}}},
		{"a live reservation of an object counted nowhere waits (in flight)",
			[]ledger.Reservation{res("nothing", later)}, Plan{Next: later}},
	} {
		got := PlanReservations(tl, teamA, tc.res, nil, now)
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// A Gatekeeper whose clock runs behind stamps expiresAt early: an expired
// reservation the observer has seen for less than ledger.MinReservationTTL
// on its own clock waits until it has; the clock forgets reservations gone
// from the bucket, and one seen again after that is new to it.
func TestReservationClockHoldsExpiryToTheObserversOwnClock(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	early := ledger.Reservation{ClaimID: "unknown", Amount: 1, ExpiresAt: now.Add(-time.Minute)}
	tl := NewTally()
	clock := NewReservationClock(ledger.MinReservationTTL)
	seenAt := now.Add(-10 * time.Second)
	clock.NotBefore(teamA, []ledger.Reservation{early}, seenAt)

	got := PlanReservations(tl, teamA, []ledger.Reservation{early}, clock.NotBefore(teamA, []ledger.Reservation{early}, now), now)
	if diff := cmp.Diff(Plan{Next: seenAt.Add(ledger.MinReservationTTL)}, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("seen 10s ago (-want +got):\n%s", diff)
	}
	later := seenAt.Add(ledger.MinReservationTTL)
	got = PlanReservations(tl, teamA, []ledger.Reservation{early}, clock.NotBefore(teamA, []ledger.Reservation{early}, later), later)
	if diff := cmp.Diff(Plan{Check: []ledger.Reservation{early}}, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("seen for the minimum TTL (-want +got):\n%s", diff)
	}
	clock.NotBefore(teamA, nil, later)
	if notBefore := clock.NotBefore(teamA, []ledger.Reservation{early}, later); !notBefore["unknown"].Equal(later.Add(ledger.MinReservationTTL)) {
		t.Errorf("a reservation seen again after it was gone: not expired before %v, want %v", notBefore["unknown"], later.Add(ledger.MinReservationTTL))
	}
}

func TestExpired(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   string
		live Live
		want bool
	}{
		{"absent", "u1", Live{Watched: true}, true},
		{"another object of that name", "u1", Live{Exists: true, UID: "u2", Watched: true}, true},
		{"present, watched, not evaluated yet", "u1", Live{Exists: true, UID: "u1", Generation: 1, Watched: true}, false},
		{"present but its kind is not watched", "u1", Live{Exists: true, UID: "u1", Generation: 1}, true},
		{"update never applied (generation behind)", "u1/3/500", Live{Exists: true, UID: "u1", Generation: 2, Watched: true}, true},
		{"update applied, not evaluated yet", "u1/3/500", Live{Exists: true, UID: "u1", Generation: 3, Watched: true}, false},
	} {
		if got := Expired(ledger.Reservation{ClaimID: tc.id}, tc.live); got != tc.want {
			t.Errorf("%s: Expired = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// An object a constraint cannot count keeps at least what it counted in
// every bucket, and what the constraints that can count it ask for more.
func TestKeepCountingNeverCountsLess(t *testing.T) {
	tally := NewTally()
	tally.Set("cm/b", Object{UID: "b", Amounts: map[ledger.BucketKey]int64{teamA: 4, acme: 4}})
	before := tally.Amounts("cm/b")
	if want := map[ledger.BucketKey]int64{teamA: 4, acme: 4}; !maps.Equal(before, want) {
		t.Fatalf("Amounts %v, want %v", before, want)
	}
	if got := tally.Amounts("cm/none"); got != nil {
		t.Fatalf("Amounts of an object not held: %v, want nil", got)
	}
	// The claim policy counting teamA cannot render; another constraint
	// now asks 6 of acme and 1 of teamB.
	got := KeepCounting(before, map[ledger.BucketKey]int64{acme: 6, teamB: 1})
	if want := map[ledger.BucketKey]int64{teamA: 4, acme: 6, teamB: 1}; !maps.Equal(got, want) {
		t.Fatalf("KeepCounting %v, want %v", got, want)
	}
	if got := KeepCounting(nil, map[ledger.BucketKey]int64{teamB: 1}); !maps.Equal(got, map[ledger.BucketKey]int64{teamB: 1}) {
		t.Fatalf("KeepCounting with nothing before: %v", got)
	}
}
