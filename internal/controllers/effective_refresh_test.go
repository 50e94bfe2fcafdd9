package controllers

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

// Done when: a busy shared bucket does not rewrite its consumer's effective
// grants on every write. A change of usage alone waits for the refresh
// (and joins the refresh already waiting); a change of limit or grants, a
// new bucket and a deleted one are refreshed at once.
func TestBucketChangesSpaceUsageRefreshes(t *testing.T) {
	bucket := func(limit, allocated int64, grants ...string) *quotav1alpha1.AllowanceBucket {
		b := builders.Bucket("acme-configmaps", "quotakeeper-system").
			Of(quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}, "core/configmaps").
			Usage(limit, allocated, 0, max(limit-allocated, 0))
		for _, g := range grants {
			b.ContributingGrant(g, limit)
		}
		return b.Obj()
	}
	h := bucketChanges{refresh: time.Hour}
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		enqueue func(q workqueue.TypedRateLimitingInterface[pair])
		now     bool
	}{{
		name: "usage alone", now: false,
		enqueue: func(q workqueue.TypedRateLimitingInterface[pair]) {
			h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: bucket(10, 1, "g"), ObjectNew: bucket(10, 2, "g")}, q)
		},
	}, {
		name: "the limit", now: true,
		enqueue: func(q workqueue.TypedRateLimitingInterface[pair]) {
			h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: bucket(10, 1, "g"), ObjectNew: bucket(20, 1, "g")}, q)
		},
	}, {
		name: "the contributing grants", now: true,
		enqueue: func(q workqueue.TypedRateLimitingInterface[pair]) {
			h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: bucket(10, 1, "g"), ObjectNew: bucket(10, 1, "h")}, q)
		},
	}, {
		name: "a new bucket", now: true,
		enqueue: func(q workqueue.TypedRateLimitingInterface[pair]) {
			h.Create(ctx, event.TypedCreateEvent[client.Object]{Object: bucket(10, 0, "g")}, q)
		},
	}, {
		name: "a deleted bucket", now: true,
		enqueue: func(q workqueue.TypedRateLimitingInterface[pair]) {
			h.Delete(ctx, event.TypedDeleteEvent[client.Object]{Object: bucket(10, 0, "g")}, q)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[pair]())
			defer q.ShutDown()
			tc.enqueue(q)
			want := 0
			if tc.now {
				want = 1
			}
			if q.Len() != want {
				t.Errorf("queued now: %d, want %d", q.Len(), want)
			}
		})
	}
}

// Done when: usage alone rewrites at most grantsPerRefresh effective grants
// of a pair per refresh: a pair with more namespaces waits longer.
func TestUsageRefreshSpacedByFanout(t *testing.T) {
	for _, tc := range []struct {
		grants int
		want   time.Duration
	}{{0, 5 * time.Second}, {1, 5 * time.Second}, {20, 5 * time.Second}, {21, 10 * time.Second}, {100, 25 * time.Second}, {101, 30 * time.Second}} {
		h := bucketChanges{refresh: 5 * time.Second, fanout: func(pair) int { return tc.grants }}
		if got := h.usageDelay(pair{}); got != tc.want {
			t.Errorf("%d effective grants: a usage refresh waits %v, want %v", tc.grants, got, tc.want)
		}
	}
}
