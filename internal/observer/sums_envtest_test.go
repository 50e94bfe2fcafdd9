package observer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledger/kubestore"
	"github.com/quotakeeper/quotakeeper/internal/ledger/ledgertest"
	"github.com/quotakeeper/quotakeeper/internal/observer"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// A sum (creates a bucket compacted while nothing folded them) is freed
// only behind the barrier: not before the observer has seen it for
// SumBarrier, and then in a write that counts every object behind it.
// Five ConfigMaps exist; two were admitted into a sum, three hold ordinary
// create reservations. The observer folds the three at once, keeps the sum
// for as long as its barrier says, and then frees it: allocated 5, nothing
// reserved.
func TestObserverFreesSumsBehindABarrier(t *testing.T) {
	env, ctx := startControlPlane(t, "team-a")
	k8s := env.Client
	installPolicy(ctx, t, env)
	teamA := namespaceConsumer("team-a")
	key := ledger.NewBucketKey(teamA, rtNamespace, nil)
	admission := admissionLedger(k8s, time.Hour)
	for i := range 5 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("cm-%d", i)}}
		if err := k8s.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		if i >= 2 {
			reserve(ctx, t, admission, claimFor(cm, teamA, rtNamespace))
		}
	}
	// cm-0 and cm-1's reservations, compacted: an amount, no uids.
	store := kubestore.New(k8s, kubestore.Options{SystemNamespace: sysNS})
	if _, err := store.Apply(ctx, key, func(b *ledger.Bucket) error {
		b.Reservations["sum/1"] = ledger.Reservation{ClaimID: "sum/1", Amount: 2, ExpiresAt: time.Now(),
			Object: ledger.ObjectRef{APIGroup: "quota.miloapis.com", Kind: "ReservationSum", Name: "2"}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	five := figures{Allocated: 5, Count: 5, Namespaces: []nsUsage{{"team-a", 5}}}

	// An observer whose barrier is an hour away counts all five and folds
	// the three reservations, and keeps the sum: the objects behind it are
	// counted twice, never zero times.
	_, stop := startObserverWith(ctx, t, env, observerSetup{options: func(o *observer.Options) { o.SumBarrier = time.Hour }})
	eventuallyStatus(t, k8s, teamA, rtNamespace, five)
	testenv.Eventually(t, wait, "only the sum left", func() error {
		return wantReservations(k8s, teamA, "sum/1 2 ")
	})
	time.Sleep(3 * time.Second)
	if err := wantReservations(k8s, teamA, "sum/1 2 "); err != nil {
		t.Fatalf("three seconds later, with the barrier an hour away: %v", err)
	}
	stop()

	// The next one may free it two seconds after it first sees it, once the
	// barrier has passed: not before.
	const barrier = 2 * time.Second
	start := time.Now()
	_, _ = startObserverWith(ctx, t, env, observerSetup{options: func(o *observer.Options) { o.SumBarrier = barrier }})
	testenv.Eventually(t, wait, "the sum freed", func() error {
		return wantReservations(k8s, teamA)
	})
	if took := time.Since(start); took < barrier {
		t.Fatalf("the sum was freed %v after the observer started, before its barrier of %v", took, barrier)
	}
	eventuallyStatus(t, k8s, teamA, rtNamespace, five)
}

// wantReservations checks the bucket's reservations, each by the start of
// its one-string form ("<id> <amount> "), in order.
func wantReservations(k8s client.Client, c ledger.Consumer, want ...string) error {
	status, _, err := bucketStatus(k8s, c, rtNamespace)
	if err != nil {
		return err
	}
	got, _, _ := unstructured.NestedStringSlice(status, "reservations")
	if len(got) != len(want) {
		return fmt.Errorf("reservations %q, want %d starting %q", got, len(want), want)
	}
	for i := range want {
		if len(got[i]) < len(want[i]) || got[i][:len(want[i])] != want[i] {
			return fmt.Errorf("reservations %q, want %q", got, want)
		}
	}
	return nil
}

// With no observer at all, admission goes on and the bucket stays bounded:
// past CompactAbove create reservations the reserving write compacts the
// oldest into sums. The observer that comes back counts every object, folds
// the reservations left and frees the sums behind its barrier: allocated is
// the live count, nothing reserved.
func TestAnAbsentObserverLeavesABoundedBucket(t *testing.T) {
	env, ctx := startControlPlane(t, "team-a")
	k8s := env.Client
	installPolicy(ctx, t, env)
	teamA := namespaceConsumer("team-a")
	const compactAbove, creates = 10, 60
	set := ledger.NewGrantSet()
	if err := set.Set(ledger.Grant{ID: "a", Consumer: teamA, ResourceType: rtNamespace, Amount: creates}); err != nil {
		t.Fatal(err)
	}
	admission := ledger.New(kubestore.New(k8s, kubestore.Options{SystemNamespace: sysNS}), set,
		ledger.WithReservationTTL(time.Hour), ledger.WithCompactAbove(compactAbove))
	most := 0
	for i := range creates {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("cm-%d", i)}}
		if err := k8s.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		reserve(ctx, t, admission, claimFor(cm, teamA, rtNamespace))
		status, _, err := bucketStatus(k8s, teamA, rtNamespace)
		if err != nil {
			t.Fatal(err)
		}
		held, _, _ := unstructured.NestedStringSlice(status, "reservations")
		reserved, _, _ := unstructured.NestedInt64(status, "reserved")
		if reserved != int64(i+1) {
			t.Fatalf("after %d creates the bucket reserves %d", i+1, reserved)
		}
		most = max(most, len(held))
	}
	if most > compactAbove+ledger.MaxSums {
		t.Fatalf("the bucket held %d reservations at most, want at most %d (CompactAbove %d, MaxSums %d)", most, compactAbove+ledger.MaxSums, compactAbove, ledger.MaxSums)
	}
	// Full: the sums hold quota as the reservations did.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "one-too-many"}}
	if err := k8s.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if d, err := admission.Reserve(ctx, claimFor(cm, teamA, rtNamespace)); err != nil || d.Granted {
		t.Fatalf("a create past the limit, with the creates held in sums: granted %v, %v", d.Granted, err)
	}
	if err := k8s.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}

	_, _ = startObserverWith(ctx, t, env, observerSetup{options: func(o *observer.Options) { o.SumBarrier = 2 * time.Second }})
	all := figures{Allocated: creates, Count: creates, Namespaces: []nsUsage{{"team-a", creates}}}
	eventuallyStatus(t, k8s, teamA, rtNamespace, all)
	testenv.Eventually(t, wait, "the sums freed", func() error {
		return wantReservations(k8s, teamA)
	})
	eventuallyStatus(t, k8s, teamA, rtNamespace, all)
}

// Creates admitted inside a replica's capacity lease are recorded as
// ordinary reservations and folded by the observer; a replica that dies
// holding a lease, with creates admitted and never recorded, leaves the
// lease holding their quota until it lapses (LeaseSkew after its expiry),
// and the observer then frees it behind the barrier like a sum, in a write
// that counts every object admitted under it: allocated the live count,
// nothing reserved, and never less counted than exists.
func TestObserverFreesALapsedLeaseBehindTheBarrier(t *testing.T) {
	env, ctx := startControlPlane(t, "team-a")
	k8s := env.Client
	installPolicy(ctx, t, env)
	teamA := namespaceConsumer("team-a")
	set := ledger.NewGrantSet()
	if err := set.Set(ledger.Grant{ID: "a", Consumer: teamA, ResourceType: rtNamespace, Amount: 10000}); err != nil {
		t.Fatal(err)
	}
	store := &ledgertest.CrashableStore{Store: kubestore.New(k8s, kubestore.Options{SystemNamespace: sysNS})}
	admission := ledger.New(store, set, ledger.WithReservationTTL(time.Hour),
		// A lease of 10 s: the ten creates admitted after the crash must
		// fall inside it (a replica stops admitting a second before its
		// lease's expiry, and a crashed one renews nothing), however slow
		// the machine.
		ledger.WithLeases(ledger.LeaseOptions{Holder: "gk-0", Duration: 10 * time.Second, Interval: 50 * time.Millisecond}))
	leaseCtx, crash := context.WithCancel(ctx)
	defer crash()
	go func() { _ = admission.RunLeases(leaseCtx) }()
	_, _ = startObserverWith(ctx, t, env, observerSetup{options: func(o *observer.Options) { o.SumBarrier = 2 * time.Second }})

	create := func(name string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}}
		if err := k8s.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		reserve(ctx, t, admission, claimFor(cm, teamA, rtNamespace))
	}
	create("first") // synchronous; asks for a lease
	testenv.Eventually(t, wait, "a lease", func() error {
		status, _, err := bucketStatus(k8s, teamA, rtNamespace)
		if err != nil {
			return err
		}
		held, _, _ := unstructured.NestedStringSlice(status, "reservations")
		for _, r := range held {
			if strings.HasPrefix(r, ledger.LeasePrefix) {
				return nil
			}
		}
		return fmt.Errorf("no lease in %q", held)
	})
	for i := range 20 {
		create(fmt.Sprintf("leased-%d", i))
	}
	eventuallyStatus(t, k8s, teamA, rtNamespace, figures{Allocated: 21, Count: 21, Namespaces: []nsUsage{{"team-a", 21}}})

	// The replica admits ten more inside its lease and dies before it
	// records them.
	store.Crash()
	for i := range 10 {
		create(fmt.Sprintf("unrecorded-%d", i))
	}
	crash()
	// The observer counts all 31 at once; the lease stays until it lapses
	// and the barrier passes, then it is freed.
	all := figures{Allocated: 31, Count: 31, Namespaces: []nsUsage{{"team-a", 31}}}
	eventuallyStatus(t, k8s, teamA, rtNamespace, all)
	status, _, err := bucketStatus(k8s, teamA, rtNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if held, _, _ := unstructured.NestedStringSlice(status, "reservations"); len(held) != 1 || !strings.HasPrefix(held[0], ledger.LeasePrefix+"gk-0-") {
		t.Fatalf("reservations %q, want the crashed replica's lease alone", held)
	}
	testenv.Eventually(t, time.Minute, "the lapsed lease freed", func() error {
		return wantReservations(k8s, teamA)
	})
	eventuallyStatus(t, k8s, teamA, rtNamespace, all)
}
