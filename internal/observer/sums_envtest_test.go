package observer_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledger/kubestore"
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
	if testing.Short() {
		t.Skip("needs a control plane; skipped in -short mode")
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(logLevel())))
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	k8s := env.Client
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: sysNS}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{orgLabel: "acme"}}},
	} {
		if err := k8s.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
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
