package faults_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The truth each scenario's bucket is held to: what the live objects use,
// counted here from the API server by the constraint's own definition, not
// by quotakeeper's code. install's constraint "faults" is a QuotaEntity
// matching kind ConfigMap in the scenario namespaces, with a resource type
// and nothing else: every ConfigMap in a namespace, whoever made it and
// however it is labelled, uses 1 of that namespace's quota.

// liveUse is what the live objects of ns use, and the resourceVersion of
// the list it was counted from.
func liveUse(ctx context.Context, ns string) (int64, string, error) {
	var list corev1.ConfigMapList
	if err := cluster.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, "", err
	}
	return int64(len(list.Items)), list.ResourceVersion, nil
}

// liveSampler counts the live objects of a namespace again and again while
// a scenario runs, through the fault: every count must be within the limit.
// A list the fault makes fail is only counted as failed.
type liveSampler struct {
	mu       sync.Mutex
	samples  int
	failures int
	most     int64
	over     []string

	stop chan struct{}
	done chan struct{}
}

// sampleLive starts counting the live objects of ns every interval.
func sampleLive(ns string, interval time.Duration) *liveSampler {
	s := &liveSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			n, rv, err := liveUse(ctx, ns)
			cancel()
			s.record(n, rv, err)
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *liveSampler) record(n int64, rv string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failures++
		return
	}
	s.samples++
	s.most = max(s.most, n)
	if n > limit {
		s.over = append(s.over, fmt.Sprintf("%s: %d live ConfigMaps at resourceVersion %s", time.Now().Format(time.RFC3339Nano), n, rv))
	}
}

// halt stops sampling, and fails the test if any count was over the limit.
// Safe to call more than once.
func (s *liveSampler) halt(t *testing.T) {
	t.Helper()
	select {
	case <-s.stop:
		return
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Logf("live objects: %d counts (%d lists failed during the fault), most %d of %d", s.samples, s.failures, s.most, limit)
	if len(s.over) > 0 {
		t.Errorf("live objects over the limit of %d in %d of %d counts:\n%v", limit, len(s.over), s.samples, s.over)
	}
}
