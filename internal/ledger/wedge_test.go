package ledger_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// A consumer whose grants sum past int64 has no computable limit. Admission
// must fail closed, but cleanup must go on: Release and the observer's fold
// and expiry remove reservations and set usage, leaving the bucket's last
// limit as it was, so claim finalizers and namespace deletion never stall
// on the grants (issue 12).
func TestOverflowingGrantsNeverWedgeCleanup(t *testing.T) {
	f := newFixture(t)
	f.grant(t, "ns/a#0", project("p"), rtProjects, 5, nil)
	for id, amount := range map[string]int64{"released": 1, "folded": 2, "expired": 1} {
		if d := mustReserve(t, f, claim(id, req(project("p"), rtProjects, amount, nil))); !d.Granted {
			t.Fatalf("reserve %s denied: %s", id, d.Message())
		}
	}
	f.grant(t, "ns/b#0", project("p"), rtProjects, math.MaxInt64, nil)
	name := projectsKey.Name()

	before := snapshot(t, f)
	_, err := f.ledger.Reserve(f.ctx, claim("new", req(project("p"), rtProjects, 1, nil)))
	want := fmt.Sprintf(`claim "new" not reserved: the limit of bucket %s is unknown: limit of bucket %s from grant ns/b#0: int64 overflow: 5 + 9223372036854775807`, name, name)
	if err == nil || err.Error() != want || !errors.Is(err, ledger.ErrOverflow) {
		t.Fatalf("reserve with overflowing grants: err = %v, want %q wrapping ErrOverflow", err, want)
	}
	if diff := cmp.Diff(before, snapshot(t, f)); diff != "" {
		t.Fatalf("refused reserve changed state (-before +after):\n%s", diff)
	}

	lastLimit := []ledger.GrantContribution{{GrantID: "ns/a#0", Amount: 5, Generation: 1}}
	if err := f.ledger.Release(f.ctx, claim("released", req(project("p"), rtProjects, 1, nil))); err != nil {
		t.Fatalf("release with overflowing grants: %v", err)
	}
	b := f.bucket(t, projectsKey)
	if _, held := b.Reservations["released"]; held || b.Limit != 5 || !cmp.Equal(b.Grants, lastLimit) {
		t.Fatalf("after release: limit %d grants %+v reservations %v; want the reservation gone, limit 5 from ns/a#0 kept", b.Limit, b.Grants, b.Reservations)
	}

	obs := observed(2, "folded")
	obs.Expire = []string{"expired"}
	b = mustObserve(t, f, projectsKey, obs)
	if len(b.Reservations) != 0 || b.Allocated != 2 || b.Limit != 5 || !cmp.Equal(b.Grants, lastLimit) {
		t.Fatalf("after observe: limit %d grants %+v allocated %d reservations %v; want allocated 2, no reservations, limit 5 kept",
			b.Limit, b.Grants, b.Allocated, b.Reservations)
	}

	// Once the set is computable again, the grant controller's Refresh
	// records its limit, and reserving writes decide by it.
	f.grants.Delete("ns/b#0")
	f.grant(t, "ns/b#0", project("p"), rtProjects, 3, nil)
	if _, err := f.ledger.Refresh(f.ctx, projectsKey); err != nil {
		t.Fatal(err)
	}
	if d := mustReserve(t, f, claim("new", req(project("p"), rtProjects, 6, nil))); !d.Granted {
		t.Fatalf("reserve after the grants are fixed denied: %s", d.Message())
	}
	f.wantUsage(t, projectsKey, ledger.Usage{Limit: 8, Allocated: 2, Reserved: 6, Available: 0})
}

func (f *fixture) bucket(t *testing.T, key ledger.BucketKey) ledger.Bucket {
	t.Helper()
	b, ok, err := f.store.Get(f.ctx, key)
	if err != nil || !ok {
		t.Fatalf("get bucket %s: %v, found %v", key, err, ok)
	}
	return b
}
