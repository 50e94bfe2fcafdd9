package kubestore_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledger/kubestore"
)

// Done when: a caller whose deadline passes is answered at once, whether
// its reservation is still queued (then it is never written) or in the
// status write under way (then it is undone once that write lands), and
// an earlier reservation under the same claim id survives a replay that
// gives up. Status writes are held at a gate to put callers in each place.
func TestCallersWhoseDeadlinePassesLeaveNothingHeld(t *testing.T) {
	ctx := context.Background()
	acme := org(unique("deadline"))
	grants := ledger.NewGrantSet()
	if err := grants.Set(grant("quotakeeper-system/acme#0", acme, projects, 10)); err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	var written atomic.Int32 // status writes stored
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	real, err := client.NewWithWatch(rest.CopyConfig(env.Config), client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	gated := interceptor.NewClient(real, interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if armed.Load() {
				entered <- struct{}{}
				<-gate
			}
			err := c.SubResource(sub).Update(ctx, obj, opts...)
			if err == nil {
				written.Add(1)
			}
			return err
		},
	})
	l := ledger.New(kubestore.New(gated, kubestore.Options{}), grants)
	key := ledger.NewBucketKey(acme, projects, nil)
	reservations := func() []string {
		t.Helper()
		var ids []string
		for _, r := range bucketObject(t, real, key).Status.Reservations {
			ids = append(ids, r.ID)
		}
		sort.Strings(ids)
		return ids
	}

	if d, err := l.Reserve(ctx, claim("earlier", req(acme, 1))); err != nil || !d.Granted {
		t.Fatalf("earlier: %+v, %v", d, err)
	}

	// "inflight" goes out in a status write, which the gate holds.
	armed.Store(true)
	inflightCtx, cancelInflight := context.WithCancel(ctx)
	inflight := make(chan error, 1)
	go func() {
		_, err := l.Reserve(inflightCtx, claim("inflight", req(acme, 2)))
		inflight <- err
	}()
	<-entered
	// "queued" waits behind it, and gives up after 100ms: never written.
	queuedCtx, cancelQueued := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelQueued()
	_, err = l.Reserve(queuedCtx, claim("queued", req(acme, 3)))
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ledger.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "not written") {
		t.Fatalf("queued: %v", err)
	}
	// "inflight" gives up while its write is held: the outcome is unknown.
	cancelInflight()
	if err := <-inflight; !errors.Is(err, context.Canceled) || !errors.Is(err, ledger.ErrOutcomeUnknown) {
		t.Fatalf("inflight: %v", err)
	}
	// Both were answered with the write still held at the gate.
	before := written.Load()
	armed.Store(false)
	close(gate)

	// The write lands, and is undone by the next write.
	for deadline := time.Now().Add(30 * time.Second); written.Load() < before+2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d status writes after the gate opened, want 2 (the held write and its undo)", written.Load()-before)
		}
	}
	if got := reservations(); len(got) != 1 || got[0] != "earlier" {
		t.Fatalf("reservations %v, want [earlier]", got)
	}
	wantStatus(t, bucketObject(t, real, key), 10, 0, 1, 9)

	// A replay of "earlier" that gives up at once (in flight or not) undoes
	// nothing: the reservation is the earlier call's, not its own.
	gaveUp, cancel := context.WithCancel(ctx)
	cancel()
	_, _ = l.Reserve(gaveUp, claim("earlier", req(acme, 1)))
	if d, err := l.Reserve(ctx, claim("earlier", req(acme, 1))); err != nil || !d.Granted {
		t.Fatalf("earlier again: %+v, %v", d, err)
	}
	if got := reservations(); len(got) != 1 || got[0] != "earlier" {
		t.Fatalf("after the replay: reservations %v, want [earlier]", got)
	}
}
