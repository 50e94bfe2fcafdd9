package ledger_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

const (
	rtProjects  = "resourcemanager.miloapis.com/projects"
	rtInstances = "compute.miloapis.com/instances"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func project(name string) ledger.Consumer {
	return ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: name}
}

func org(name string) ledger.Consumer {
	return ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: name}
}

func mustSelector(t testing.TB, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatalf("parse selector %q: %v", s, err)
	}
	return sel
}

// fakeClock is read by the ledger through WithClock.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

type fixture struct {
	ctx    context.Context
	store  *ledger.MemoryStore
	grants *ledger.GrantSet
	clock  *fakeClock
	ledger *ledger.Ledger
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{ctx: context.Background(), store: ledger.NewMemoryStore(), grants: ledger.NewGrantSet(), clock: &fakeClock{now: t0}}
	f.ledger = ledger.New(f.store, f.grants, ledger.WithClock(f.clock.Now))
	return f
}

func (f *fixture) grant(t testing.TB, id string, c ledger.Consumer, rt string, amount int64, sel labels.Selector) {
	t.Helper()
	if err := f.grants.Set(ledger.Grant{ID: id, Generation: 1, Consumer: c, ResourceType: rt, Amount: amount, Selector: sel}); err != nil {
		t.Fatalf("set grant %s: %v", id, err)
	}
}

func (f *fixture) usage(t testing.TB, key ledger.BucketKey) ledger.Usage {
	t.Helper()
	u, err := f.ledger.Usage(f.ctx, key)
	if err != nil {
		t.Fatalf("usage of %s: %v", key, err)
	}
	return u
}

func (f *fixture) wantUsage(t testing.TB, key ledger.BucketKey, want ledger.Usage) {
	t.Helper()
	if got := f.usage(t, key); got != want {
		t.Fatalf("usage of %s = %+v, want %+v", key, got, want)
	}
}

func claim(id string, reqs ...ledger.Request) ledger.Claim {
	return ledger.Claim{ID: id, Object: ledger.ObjectRef{APIGroup: "example.com", Kind: "Thing", Namespace: "ns", Name: id, UID: "uid-" + id}, Requests: reqs}
}

func req(c ledger.Consumer, rt string, amount int64, dims map[string]string) ledger.Request {
	return ledger.Request{Consumer: c, ResourceType: rt, Amount: amount, Dimensions: dims}
}
