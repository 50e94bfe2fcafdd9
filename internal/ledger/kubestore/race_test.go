package kubestore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledger/kubestore"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// watchLimits records every version of every bucket the apiserver stores
// while the race runs, and reports any version over its limit: the invariant
// must hold at every instant, not just at the end.
func watchLimits(t *testing.T, ctx context.Context, consumers map[ledger.Consumer]int64) (stop func() (versions int, violations []string)) {
	t.Helper()
	wc, err := client.NewWithWatch(rest.CopyConfig(env.Config), client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &quotav1alpha1.AllowanceBucketList{}, client.InNamespace(quotav1alpha1.DefaultSystemNamespace))
	if err != nil {
		t.Fatal(err)
	}
	var versions int
	var violations []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			b, ok := ev.Object.(*quotav1alpha1.AllowanceBucket)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			if _, ours := consumers[ledgerconv.Consumer(b.Spec.ConsumerRef)]; !ours {
				continue // other tests' buckets share the namespace
			}
			versions++
			if used := b.Status.Allocated + b.Status.Reserved; used > b.Status.Limit {
				violations = append(violations, fmt.Sprintf("%s@%s: allocated %d + reserved %d > limit %d",
					b.Spec.ConsumerRef.Name, b.ResourceVersion, b.Status.Allocated, b.Status.Reserved, b.Status.Limit))
			}
		}
	}()
	return func() (int, []string) {
		w.Stop()
		<-done
		return versions, violations
	}
}

// Three ledgers with clients of their own, as three Gatekeeper replicas
// would be, race on one organization bucket and on overlapping
// project+organization claims, while an observer with a client of its own
// counts the objects that appeared (half the workers' granted claims) and
// folds their reservations. No bucket may ever hold more than its limit;
// after quiescence and a last observation each bucket's allocated is the
// appeared objects' sum and its reservations are exactly the other granted
// claims, and replaying those changes nothing.
func TestReplicasRace(t *testing.T) {
	ctx := context.Background()
	acme := org(unique("race-org"))
	p1 := ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: unique("race-p1")}
	p2 := ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: unique("race-p2")}
	limits := map[ledger.Consumer]int64{acme: 30, p1: 12, p2: 12}

	const replicas, workers, claimsPerWorker = 3, 12, 4
	newLedger := func() *ledger.Ledger {
		grants := ledger.NewGrantSet()
		for c, limit := range limits {
			if err := grants.Set(grant("quotakeeper-system/"+c.Name+"#0", c, projects, limit)); err != nil {
				t.Fatal(err)
			}
		}
		return ledger.New(kubestore.New(newClient(t), kubestore.Options{}), grants)
	}
	ledgers := make([]*ledger.Ledger, replicas)
	for i := range ledgers {
		ledgers[i] = newLedger()
	}
	observer := newLedger()
	stop := watchLimits(t, ctx, limits)

	type outcome struct {
		claim            ledger.Claim
		granted, appears bool
	}
	var mu sync.Mutex
	var outcomes []outcome
	observe := func() {
		mu.Lock()
		obs := map[ledger.Consumer]*ledger.Observation{}
		for c := range limits {
			obs[c] = &ledger.Observation{}
		}
		for _, o := range outcomes {
			if !o.granted || !o.appears {
				continue
			}
			for _, r := range o.claim.Requests {
				ob := obs[r.Consumer]
				ob.Allocated += r.Amount
				ob.Count++
				ob.Fold = append(ob.Fold, o.claim.ID)
			}
		}
		mu.Unlock()
		for c, ob := range obs {
			if ob.Allocated > 0 {
				ob.ByNamespace = map[string]int64{"default": ob.Allocated}
			}
			if _, err := observer.Observe(ctx, ledger.NewBucketKey(c, projects, nil), *ob); err != nil {
				t.Errorf("observe %s: %v", c.Name, err)
			}
		}
	}
	done := make(chan struct{})
	var background sync.WaitGroup
	background.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				observe()
			}
		}
	})
	var wg sync.WaitGroup
	for r := range replicas {
		for w := range workers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(r), uint64(w)))
				for i := range claimsPerWorker {
					id := fmt.Sprintf("race-%d-%d-%d", r, w, i)
					var c ledger.Claim
					switch rng.IntN(3) {
					case 0: // organization only
						c = claim(id, req(acme, 1))
					case 1: // project cap under the organization cap
						c = claim(id, req(p1, 1), req(acme, 1))
					default:
						c = claim(id, req(p2, 2), req(acme, 2))
					}
					d, err := ledgers[r].Reserve(ctx, c)
					if err != nil {
						t.Errorf("%s: %v", id, err)
						return
					}
					mu.Lock()
					outcomes = append(outcomes, outcome{c, d.Granted, w%2 == 0})
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	close(done)
	background.Wait()
	observe() // after quiescence

	versions, violations := stop()
	if len(violations) > 0 {
		t.Fatalf("buckets over their limit in %d of %d stored versions:\n%v", len(violations), versions, violations)
	}

	// After quiescence: every bucket's allocated is the appeared objects'
	// sum and its reservations are exactly the other granted claims.
	want := map[ledger.Consumer]map[string]int64{}
	wantAllocated := map[ledger.Consumer]int64{}
	grantedCount := 0
	for _, o := range outcomes {
		if !o.granted {
			continue
		}
		grantedCount++
		for _, r := range o.claim.Requests {
			if o.appears {
				wantAllocated[r.Consumer] += r.Amount
				continue
			}
			if want[r.Consumer] == nil {
				want[r.Consumer] = map[string]int64{}
			}
			want[r.Consumer][o.claim.ID] += r.Amount
		}
	}
	if len(outcomes) != replicas*workers*claimsPerWorker {
		t.Fatalf("%d outcomes, want %d", len(outcomes), replicas*workers*claimsPerWorker)
	}
	rvs := map[ledger.Consumer]string{}
	for c, limit := range limits {
		obj := bucketObject(t, env.Client, ledger.NewBucketKey(c, projects, nil))
		entries := map[string]int64{}
		for _, r := range obj.Status.Reservations {
			entries[r.ID] += r.Amount
		}
		var sum int64
		for id, amount := range want[c] {
			sum += amount
			if entries[id] != amount {
				t.Errorf("%s: granted claim %s holds %d, want %d", c.Name, id, entries[id], amount)
			}
		}
		if len(entries) != len(want[c]) {
			t.Errorf("%s: %d reservations for %d granted claims not yet counted (a denied claim was not rolled back, or a fold missed)", c.Name, len(entries), len(want[c]))
		}
		if obj.Status.Allocated != wantAllocated[c] || obj.Status.Reserved != sum || obj.Status.Allocated+obj.Status.Reserved > limit {
			t.Errorf("%s: allocated %d reserved %d, want %d (appeared) and %d (granted, not appeared) within limit %d",
				c.Name, obj.Status.Allocated, obj.Status.Reserved, wantAllocated[c], sum, limit)
		}
		rvs[c] = obj.ResourceVersion
	}
	// The organization is the binding cap: contention must have reached
	// it, so that some organization-only claim was refused. Not "filled it
	// at the end": a claim over a project and the organization takes the
	// organization first (buckets in name order) and returns it when its
	// project refuses, so a run can end with some of it free after the
	// last organization-only claim was refused (seen in make test: 2 left,
	// 22 of 144 granted).
	orgRefused := 0
	for _, o := range outcomes {
		if !o.granted && len(o.claim.Requests) == 1 && o.claim.Requests[0].Consumer == acme {
			orgRefused++
		}
	}
	if orgRefused == 0 {
		t.Errorf("no organization-only claim refused, %d of %d claims granted: the race did not contend", grantedCount, len(outcomes))
	}
	t.Logf("%d of %d claims granted; %d bucket versions watched", grantedCount, len(outcomes), versions)

	// Replaying granted claims still held on any replica is granted again and
	// writes nothing.
	for i, o := range outcomes {
		if !o.granted || o.appears {
			continue
		}
		d, err := ledgers[i%replicas].Reserve(ctx, o.claim)
		if err != nil || !d.Granted {
			t.Fatalf("replay of granted %s: granted=%v err=%v", o.claim.ID, d.Granted, err)
		}
	}
	for c, rv := range rvs {
		if got := bucketObject(t, env.Client, ledger.NewBucketKey(c, projects, nil)).ResourceVersion; got != rv {
			t.Errorf("%s: replay wrote the bucket (resourceVersion %s -> %s)", c.Name, rv, got)
		}
	}
}
