package kubestore_test

import (
	"context"
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledger/kubestore"
)

// Two writers on the real API server, each with a store of its own (a
// Gatekeeper replica and the manager), each deciding from a grant cache of
// its own: once the leader records a lowered grant, a replica whose cache
// still has the old one, racing with many goroutines, is held to the
// lowered limit, and its writes leave the recorded limit as it is. Counted
// from the stored bucket, not from the ledger's answers.
func TestStaleReplicaHeldToTheRecordedLimit(t *testing.T) {
	ctx := context.Background()
	acme := org(unique("stale"))
	key := ledger.NewBucketKey(acme, projects, nil)
	fresh, stale := ledger.NewGrantSet(), ledger.NewGrantSet()
	for _, g := range []*ledger.GrantSet{fresh, stale} {
		if err := g.Set(grant("quotakeeper-system/acme#0", acme, projects, 10)); err != nil {
			t.Fatal(err)
		}
	}
	leader := ledger.New(kubestore.New(newClient(t), kubestore.Options{}), fresh)
	replica := ledger.New(kubestore.New(newClient(t), kubestore.Options{}), stale)
	if _, err := leader.Refresh(ctx, key); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if d, err := replica.Reserve(ctx, claim(unique("before"), req(acme, 1))); err != nil || !d.Granted {
			t.Fatalf("reservation %d under the grant of 10: granted=%v err=%v", i, d.Granted, err)
		}
	}

	// Lowered to 3 and recorded by the leader; the replica's cache has 10.
	lowered := grant("quotakeeper-system/acme#0", acme, projects, 3)
	lowered.Generation = 2
	if err := fresh.Set(lowered); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Refresh(ctx, key); err != nil {
		t.Fatal(err)
	}
	granted := reserveAtOnce(ctx, t, replica, acme, unique("after"), 20)
	if granted != 1 {
		t.Errorf("the stale replica granted %d of 20 creates after the grant was lowered to 3 with 2 held, want 1", granted)
	}
	obj := bucketObject(t, env.Client, key)
	wantStatus(t, obj, 3, 0, 3, 0)
	if len(obj.Status.Reservations) != 3 {
		t.Errorf("the stored bucket holds %d reservations, want 3", len(obj.Status.Reservations))
	}
}
