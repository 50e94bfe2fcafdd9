package kubestore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledger/kubestore"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

const projects = "resourcemanager.miloapis.com/projects"

// unique makes names distinct across -count runs against the one apiserver.
func unique(name string) string {
	return fmt.Sprintf("%s-%d", name, runID.Add(1))
}

var runID atomic.Int64

func org(name string) ledger.Consumer {
	return ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: name}
}

// grant is an engine value, not an API object (test/builders makes those):
// a ledger.Grant is one struct literal, so it stays beside the tests.
func grant(id string, c ledger.Consumer, resourceType string, amount int64) ledger.Grant {
	return ledger.Grant{ID: id, Generation: 1, Consumer: c, ResourceType: resourceType, Amount: amount, Selector: labels.Everything()}
}

func claim(id string, reqs ...ledger.Request) ledger.Claim {
	return ledger.Claim{ID: id, Object: ledger.ObjectRef{Kind: "ConfigMap", Namespace: "default", Name: id, UID: id}, Requests: reqs}
}

func req(c ledger.Consumer, amount int64) ledger.Request {
	return ledger.Request{Consumer: c, ResourceType: projects, Amount: amount}
}

func bucketObject(t *testing.T, c client.Client, key ledger.BucketKey) *quotav1alpha1.AllowanceBucket {
	t.Helper()
	obj := &quotav1alpha1.AllowanceBucket{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: quotav1alpha1.BucketNamespace(ledgerconv.ConsumerRef(key.Consumer), quotav1alpha1.DefaultSystemNamespace), Name: key.Name()}, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func wantStatus(t *testing.T, obj *quotav1alpha1.AllowanceBucket, limit, allocated, reserved, available int64) {
	t.Helper()
	st := obj.Status
	if st.Limit != limit || st.Allocated != allocated || st.Reserved != reserved || st.Available != available {
		t.Fatalf("bucket %s: limit/allocated/reserved/available = %d/%d/%d/%d, want %d/%d/%d/%d",
			obj.Name, st.Limit, st.Allocated, st.Reserved, st.Available, limit, allocated, reserved, available)
	}
}

// The full life of a reservation, checked on the stored object.
func TestLifecycleOnTheAPIServer(t *testing.T) {
	ctx := context.Background()
	acme := org(unique("lifecycle"))
	grants := ledger.NewGrantSet()
	if err := grants.Set(grant("quotakeeper-system/acme#0", acme, projects, 3)); err != nil {
		t.Fatal(err)
	}
	// A fixed clock, so stored expiries can be checked exactly.
	now := time.Date(2001, 1, 1, 10, 0, 0, 0, time.UTC)
	l := ledger.New(kubestore.New(newClient(t), kubestore.Options{}), grants,
		ledger.WithClock(func() time.Time { return now }), ledger.WithReservationTTL(time.Minute))
	key := ledger.NewBucketKey(acme, projects, nil)

	for i := 1; i <= 3; i++ {
		d, err := l.Reserve(ctx, claim(fmt.Sprintf("cm-%d", i), req(acme, 1)))
		if err != nil || !d.Granted {
			t.Fatalf("reservation %d: granted=%v err=%v", i, d.Granted, err)
		}
	}
	d, err := l.Reserve(ctx, claim("cm-4", req(acme, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if d.Granted {
		t.Fatal("fourth reservation granted past a limit of 3")
	}
	if got, want := d.Message(), "requested 1 of resourcemanager.miloapis.com/projects, available 0 of 3 (allocated 0, reserved 3)"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}

	obj := bucketObject(t, env.Client, key)
	wantStatus(t, obj, 3, 0, 3, 0)
	if len(obj.Status.Reservations) != 3 || obj.Status.Reservations[0].ID != "cm-1" ||
		!obj.Status.Reservations[0].ExpiresAt.Time.Equal(now.Add(time.Minute)) ||
		obj.Status.Reservations[0].Object.UID != "cm-1" {
		t.Fatalf("reservations stored as %+v", obj.Status.Reservations)
	}
	if obj.Status.GrantCount != 1 || obj.Status.ContributingGrantRefs[0] != (quotav1alpha1.ContributingGrantRef{
		Name: "acme", Namespace: "quotakeeper-system", Amount: 3, ObservedGeneration: 1}) {
		t.Fatalf("contributing grants %+v", obj.Status.ContributingGrantRefs)
	}
	if obj.Spec.ConsumerRef.Name != acme.Name || obj.Spec.ResourceType != projects {
		t.Fatalf("spec %+v", obj.Spec)
	}
	// claimCount is present when 0, as Milo's is: read the stored JSON.
	raw := &unstructured.Unstructured{}
	raw.SetGroupVersionKind(quotav1alpha1.GroupVersion.WithKind("AllowanceBucket"))
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), raw); err != nil {
		t.Fatal(err)
	}
	if n, found, _ := unstructured.NestedInt64(raw.Object, "status", "claimCount"); !found || n != 0 {
		t.Fatalf("status.claimCount %d (present: %v), want 0 present", n, found)
	}
	// Milo's labels, to list a consumer's buckets by.
	if diff := cmp.Diff(map[string]string{"quota.miloapis.com/consumer-kind": "Organization", "quota.miloapis.com/consumer-name": acme.Name}, obj.Labels); diff != "" {
		t.Fatalf("labels (-want +got):\n%s", diff)
	}

	// cm-1 appeared and is counted: the observer folds its reservation in
	// the same write. cm-2's claim is released.
	if _, err := l.Observe(ctx, key, ledger.Observation{Allocated: 1, ByNamespace: map[string]int64{"default": 1}, Count: 1, Fold: []string{"cm-1"}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, claim("cm-2", req(acme, 1))); err != nil {
		t.Fatal(err)
	}
	obj = bucketObject(t, env.Client, key)
	wantStatus(t, obj, 3, 1, 1, 1)
	if diff := cmp.Diff([]quotav1alpha1.NamespaceUsage{{Namespace: "default", Allocated: 1}}, obj.Status.Namespaces); obj.Status.ClaimCount != 1 || diff != "" {
		t.Fatalf("claimCount %d, namespaces (-want +got):\n%s", obj.Status.ClaimCount, diff)
	}

	// cm-3's object never appeared: the observer expires its reservation.
	// A cluster-scoped object counts under the namespace "".
	now = now.Add(time.Minute)
	if _, err := l.Observe(ctx, key, ledger.Observation{Allocated: 1, ByNamespace: map[string]int64{"": 1}, Count: 1, Expire: []string{"cm-3"}}); err != nil {
		t.Fatal(err)
	}
	obj = bucketObject(t, env.Client, key)
	wantStatus(t, obj, 3, 1, 0, 2)
	if diff := cmp.Diff([]quotav1alpha1.NamespaceUsage{{Namespace: "", Allocated: 1}}, obj.Status.Namespaces); diff != "" {
		t.Fatalf("namespaces (-want +got):\n%s", diff)
	}

	// A lowered limit keeps the usage and says so.
	if err := grants.Set(grant("quotakeeper-system/acme#0", acme, projects, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Refresh(ctx, key); err != nil {
		t.Fatal(err)
	}
	obj = bucketObject(t, env.Client, key)
	wantStatus(t, obj, 0, 1, 0, 0)
	if c := obj.Status.Conditions; len(c) != 1 || c[0].Type != "OverLimit" || c[0].Status != metav1.ConditionTrue || c[0].Reason != "LimitLowered" {
		t.Fatalf("conditions %+v", c)
	}
}

// Concurrent reservations in one process share status writes, and the
// bucket admits exactly its limit.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	acme := org(unique("group-commit"))
	grants := ledger.NewGrantSet()
	if err := grants.Set(grant("quotakeeper-system/gc#0", acme, projects, 40)); err != nil {
		t.Fatal(err)
	}
	store := kubestore.New(newClient(t), kubestore.Options{})
	l := ledger.New(store, grants)

	granted := reserveAtOnce(ctx, t, l, acme, "gc", 64)
	if granted != 40 {
		t.Fatalf("granted %d, want exactly the limit 40", granted)
	}
	wantStatus(t, bucketObject(t, env.Client, ledger.NewBucketKey(acme, projects, nil)), 40, 0, 40, 0)
	writes, _ := store.Stats()
	// Refusals write nothing, so one write per reservation would be 40.
	if writes >= 40 {
		t.Fatalf("%d status writes for 40 reservations: group commit did not batch", writes)
	}
	t.Logf("%d reservations in %d status writes", granted, writes)
}

// reserveAtOnce reserves 1 for consumer under n claims named prefix-<i>,
// from n goroutines released together, and returns how many were granted.
func reserveAtOnce(ctx context.Context, t *testing.T, l *ledger.Ledger, consumer ledger.Consumer, prefix string, n int) int {
	t.Helper()
	var wg sync.WaitGroup
	var granted atomic.Int64
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			d, err := l.Reserve(ctx, claim(fmt.Sprintf("%s-%d", prefix, i), req(consumer, 1)))
			if err != nil {
				t.Error(err)
				return
			}
			if d.Granted {
				granted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	return int(granted.Load())
}

// A bucket's group-commit queue (and the object it keeps) is dropped once
// the bucket has not been written for IdleQueueTTL, so a long-running
// process does not keep one for every bucket it ever wrote; a bucket written
// again gets a new queue and its write lands as before.
func TestIdleBucketQueuesArePruned(t *testing.T) {
	ctx := context.Background()
	grants := ledger.NewGrantSet()
	var consumers []ledger.Consumer
	for i := range 3 {
		c := org(unique(fmt.Sprintf("idle-%d", i)))
		consumers = append(consumers, c)
		if err := grants.Set(grant(fmt.Sprintf("quotakeeper-system/idle-%d#0", i), c, projects, 10)); err != nil {
			t.Fatal(err)
		}
	}
	store := kubestore.New(newClient(t), kubestore.Options{IdleQueueTTL: time.Second})
	l := ledger.New(store, grants)
	for i, c := range consumers {
		if d, err := l.Reserve(ctx, claim(fmt.Sprintf("idle-%d", i), req(c, 1))); err != nil || !d.Granted {
			t.Fatalf("reserve in %s: %+v, %v", c.Name, d, err)
		}
	}
	if n := store.Queues(); n != 3 {
		t.Fatalf("%d queues right after writing 3 buckets, want 3", n)
	}
	for deadline := time.Now().Add(10 * time.Second); store.Queues() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d queues 10s after the last write, want 0 (IdleQueueTTL 1s)", store.Queues())
		}
	}
	if d, err := l.Reserve(ctx, claim("idle-again", req(consumers[0], 2))); err != nil || !d.Granted {
		t.Fatalf("reserve after the queue was pruned: %+v, %v", d, err)
	}
	wantStatus(t, bucketObject(t, env.Client, ledger.NewBucketKey(consumers[0], projects, nil)), 10, 0, 3, 7)
}

// A bucket compacted through the store (CompactAbove 4, its sums merged
// past MaxSums) reads back from the API server exactly as a memory store
// driven the same way holds it.
func TestACompactedBucketRoundTrips(t *testing.T) {
	ctx := context.Background()
	acme := org(unique("compacted"))
	grants := ledger.NewGrantSet()
	if err := grants.Set(grant("quotakeeper-system/acme#0", acme, projects, 1000)); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2001, 1, 1, 10, 0, 0, 0, time.UTC)
	clock := ledger.WithClock(func() time.Time { return now })
	kube := ledger.New(kubestore.New(newClient(t), kubestore.Options{}), grants, clock, ledger.WithCompactAbove(4))
	mem := ledger.NewMemoryStore()
	ref := ledger.New(mem, grants, clock, ledger.WithCompactAbove(4))
	key := ledger.NewBucketKey(acme, projects, nil)
	for i := range 40 {
		now = now.Add(time.Second + 1500*time.Nanosecond) // microseconds are stored, nanoseconds not
		c := claim(fmt.Sprintf("cm-%d", i), req(acme, int64(1+i%3)))
		for _, l := range []*ledger.Ledger{kube, ref} {
			if d, err := l.Reserve(ctx, c); err != nil || !d.Granted {
				t.Fatalf("reserve %s: granted=%v err=%v", c.ID, d.Granted, err)
			}
		}
	}
	want, _, err := mem.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := kubestore.New(newClient(t), kubestore.Options{}).Get(ctx, key)
	if err != nil || !ok {
		t.Fatalf("get: %v (exists %v)", err, ok)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("read back (-memory store +API server):\n%s", diff)
	}
	var sums int
	for id := range got.Reservations {
		if ledger.IsSum(id) {
			sums++
		}
	}
	if sums == 0 || len(got.Reservations) > 4+ledger.MaxSums {
		t.Fatalf("%d reservations, %d sums: not compacted", len(got.Reservations), sums)
	}
	wantStatus(t, bucketObject(t, env.Client, key), 1000, 0, 79, 921)
	for _, r := range bucketObject(t, env.Client, key).Status.Reservations {
		if r.Object.UID != r.ID && !ledger.IsSum(r.ID) {
			t.Fatalf("reservation %s stored for object uid %q", r.ID, r.Object.UID)
		}
	}
}
