package faults_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// Creators per scenario and how many objects each keeps at most: 4 × 4
// wanted against a limit of 10.
const creatorCount, hold = 4, 4

// Every scenario runs creators against its namespace's quota, lets them
// contend at the limit, strikes, recovers, and waits until creates are
// admitted again. Throughout, it counts the live objects from the API server
// by the constraint's definition (liveUse: not quotakeeper's count). Then,
// with the creators stopped and the cluster quiet, it asserts exactly:
//   - no stored version of the bucket, from the scenario's start, was over
//     its limit, and none was missed (history);
//   - no count of the live objects, before, during or after the fault, was
//     over the limit;
//   - every create the creators saw admitted (and did not delete) exists,
//     none they saw refused or deleted does;
//   - the bucket's allocated and claimCount equal what the live objects
//     use, with no reservation left.
func runScenario(t *testing.T, scenario string, fault func(t *testing.T)) {
	setup(t)
	ctx := context.Background()
	ns := scenarioNamespace(scenario)
	h := watchBucket(t, bucketKey(ns))
	lv := sampleLive(ns, 250*time.Millisecond)
	defer lv.halt(t)
	stop := make(chan struct{})
	o, wg := creators(ns, creatorCount, hold, stop)
	stopCreators := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopCreators()

	testenv.Eventually(t, 2*time.Minute, "creators contending at the limit", func() error {
		if admitted, _, quota, _ := o.counts(); admitted < limit || quota == 0 {
			return fmt.Errorf("%d admitted, %d quota denials", admitted, quota)
		}
		return nil
	})
	fault(t)
	restartExited(t)
	// Recovered: the limit's worth of creates admitted after the fault.
	after := o.admitted.Load()
	testenv.Eventually(t, 2*time.Minute, "creates admitted again", func() error {
		if n := o.admitted.Load() - after; n < limit {
			return fmt.Errorf("%d admitted since recovery", n)
		}
		return nil
	})
	stopCreators()
	restartExited(t)

	var live map[string]bool
	testenv.Eventually(t, 2*time.Minute, "the bucket counting exactly what the live objects use, no reservation in flight", func() error {
		var err error
		if live, err = existing(ctx, ns); err != nil {
			return err
		}
		n, rv, err := liveUse(ctx, ns)
		if err != nil {
			return err
		}
		b, err := getBucket(ctx, ns)
		if err != nil {
			return err
		}
		if st := b.Status; st.Allocated != n || int64(st.ClaimCount) != n || st.Reserved != 0 || len(st.Reservations) != 0 || st.Limit != limit {
			return fmt.Errorf("the live objects use %d (at resourceVersion %s); bucket limit %d allocated %d claimCount %d reserved %d reservations %+v",
				n, rv, st.Limit, st.Allocated, st.ClaimCount, st.Reserved, st.Reservations)
		}
		return nil
	})
	h.stop(t)
	lv.halt(t)
	o.check(t, live)
	o.logOthers(t)
	logExpired(t, ns)
	admitted, refused, quota, unknown := o.counts()
	t.Logf("%d creates admitted, %d refused (%d by quota), %d without an answer; %d objects live and counted", admitted, refused, quota, unknown, len(live))
}

// (a) kill -9 of kube-apiserver under load, and a restart with the same
// flags, port, certificates and etcd.
func TestKillAPIServer(t *testing.T) {
	runScenario(t, "apiserver", func(t *testing.T) {
		s, err := cluster.APIServer()
		if err != nil {
			t.Fatal(err)
		}
		before, err := getBucket(context.Background(), scenarioNamespace("apiserver"))
		if err != nil {
			t.Fatal(err)
		}
		s.Kill()
		if err := s.Start(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		if err := cluster.WaitAPIServer(context.Background(), 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		t.Logf("a watch through the restarted apiserver from the bucket's last resourceVersion before the kill: %s", resumeThroughAPIServer(t, before))
	})
}

// resumeThroughAPIServer says what a watch of the bucket resumed through the
// apiserver from its resourceVersion gets: why history is read from etcd.
func resumeThroughAPIServer(t *testing.T, b *quotav1alpha1.AllowanceBucket) string {
	t.Helper()
	wc, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: cluster.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := wc.Watch(ctx, &quotav1alpha1.AllowanceBucketList{}, client.InNamespace(b.Namespace),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: b.ResourceVersion}})
	if err != nil {
		return "refused: " + err.Error()
	}
	defer w.Stop()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			return "closed without an event"
		}
		if ev.Type == watch.Error {
			return "refused: " + apierrors.FromObject(ev.Object).Error()
		}
		return fmt.Sprintf("resumed (first event %s)", ev.Type)
	case <-ctx.Done():
		return "no event within 10s"
	}
}

// (b) etcd stopped for 10 s under load, then started again on its data.
func TestStopEtcd(t *testing.T) {
	runScenario(t, "etcd", func(t *testing.T) {
		e, err := cluster.Etcd()
		if err != nil {
			t.Fatal(err)
		}
		e.Stop()
		time.Sleep(10 * time.Second) // the outage itself
		if err := e.Start(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := cluster.WaitAPIServer(context.Background(), 2*time.Minute); err != nil {
			t.Fatal(err)
		}
	})
}

// (c) the manager (observer and controllers) killed while the bucket holds
// reservations, and down for longer than the reservation TTL under load:
// admission goes on reserving, nothing folds or expires, and the restarted
// manager must fold the reservations whose objects exist, long past their
// expiry, and expire only those whose objects do not.
func TestStopManagerPastTTL(t *testing.T) {
	ns := scenarioNamespace("manager")
	runScenario(t, "manager", func(t *testing.T) {
		ctx := context.Background()
		testenv.Eventually(t, time.Minute, "the manager killed while the bucket holds reservations", func() error {
			if b, err := getBucket(ctx, ns); err != nil {
				return err
			} else if len(b.Status.Reservations) == 0 {
				return errors.New("no reservation in flight")
			}
			cluster.Manager.Kill()
			b, err := getBucket(ctx, ns)
			if err == nil && len(b.Status.Reservations) > 0 {
				return nil
			}
			if err := cluster.Restart(ctx, cluster.Manager); err != nil {
				t.Fatal(err)
			}
			if err != nil {
				return err
			}
			return errors.New("the reservations were folded before the manager died")
		})
		time.Sleep(reservationTTL + reservationTTL/2) // the outage itself
		b, err := getBucket(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		expired := 0
		for _, r := range b.Status.Reservations {
			if r.ExpiresAt.Time.Before(time.Now()) {
				expired++
			}
		}
		if expired == 0 {
			t.Fatalf("no reservation past its expiry after the outage: %+v", b.Status.Reservations)
		}
		t.Logf("the manager comes back to %d reservations past their expiry (allocated %d)", expired, b.Status.Allocated)
		if err := cluster.Restart(ctx, cluster.Manager); err != nil {
			t.Fatal(err)
		}
	})
}

// (d) kill -9 of a Gatekeeper replica while it decides a batch: its
// in-flight reservations are written but never answered, so their creates
// fail and the reservations must expire.
func TestKillGatekeeperMidBatch(t *testing.T) {
	runScenario(t, "gatekeeper", func(t *testing.T) {
		gk := cluster.Gatekeepers[0]
		gk.Kill()
		time.Sleep(2 * time.Second) // load goes to the other replica meanwhile
		if err := cluster.Restart(context.Background(), gk); err != nil {
			t.Fatal(err)
		}
	})
}

// restartExited starts again any Gatekeeper replica or manager that exited
// on its own during a fault, as its Deployment would (the manager exits when
// it loses its leader lease, as controller-runtime's managers do).
func restartExited(t *testing.T) {
	t.Helper()
	for _, p := range append([]*localcluster.Process{cluster.Manager}, cluster.Gatekeepers...) {
		if p.Running() {
			continue
		}
		t.Logf("%s had exited (see %s); starting it again, as its Deployment would", p.Name, p.LogPath)
		if err := cluster.Restart(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
}

// logExpired logs the observer's ReservationExpired Events in ns: one per
// reservation of a create admitted but never stored (alike Events may be
// merged into one).
func logExpired(t *testing.T, ns string) {
	t.Helper()
	var list eventsv1.EventList
	if err := cluster.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Reason == "ReservationExpired" {
			n++
		}
	}
	t.Logf("%d ReservationExpired Events in %s", n, ns)
}
