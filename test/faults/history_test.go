package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// history is every version of one bucket that etcd stores while a scenario
// runs, read from etcd itself: a watch from the scenario's start revision,
// resumed from the last revision it delivered whenever the fault breaks it.
//
// Why etcd and not a watch through the apiserver: a restarted apiserver
// builds its watch cache afresh from the current revision, so a watch
// resumed from an earlier resourceVersion is refused (410 Gone) and the
// versions written between the last event delivered and the kill would be
// lost to a list. etcd keeps every revision until the apiserver compacts
// it (every 5 minutes by default, keeping the last interval's), so resuming
// there misses nothing, and etcd's per-key version counter proves it: each
// modification adds exactly one, so consecutive versions seen must differ
// by one.
type history struct {
	key string
	cli *clientv3.Client

	mu         sync.Mutex
	versions   int
	maxUsed    int64
	violations []string
	gaps       []string
	lastRev    int64
	lastVer    int64
	resumed    int
	// log is every version in short, for the context of a violation.
	log []string

	cancel context.CancelFunc
	done   chan struct{}
}

// watchBucket starts recording every stored version of the bucket. The
// bucket must exist.
func watchBucket(t *testing.T, key client.ObjectKey) *history {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{cluster.EtcdEndpoint()},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Custom resources are stored as JSON under /registry/<group>/<plural>/.
	h := &history{key: path.Join("/registry", quotav1alpha1.GroupVersion.Group, "allowancebuckets", key.Namespace, key.Name), cli: cli, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	resp, err := cli.Get(ctx, h.key)
	if err != nil || len(resp.Kvs) != 1 {
		cancel()
		t.Fatalf("etcd key %s: %d values, %v", h.key, len(resp.Kvs), err)
	}
	h.record(resp.Kvs[0])
	go h.follow(ctx)
	return h
}

// follow watches from the revision after the last one recorded, again and
// again, until stopped.
func (h *history) follow(ctx context.Context) {
	defer close(h.done)
	for ctx.Err() == nil {
		h.mu.Lock()
		from := h.lastRev + 1
		h.mu.Unlock()
		// RequireLeader ends the watch when etcd goes away, instead of the
		// client retrying behind our back; we resume it ourselves.
		for resp := range h.cli.Watch(clientv3.WithRequireLeader(ctx), h.key, clientv3.WithRev(from)) {
			if resp.CompactRevision != 0 {
				h.gap(fmt.Sprintf("etcd compacted to revision %d before revision %d was read: the versions in between cannot be checked", resp.CompactRevision, from))
				return
			}
			if err := resp.Err(); err != nil {
				break
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE {
					h.gap(fmt.Sprintf("bucket deleted at revision %d", ev.Kv.ModRevision))
					continue
				}
				h.record(ev.Kv)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
			h.mu.Lock()
			h.resumed++
			h.mu.Unlock()
		}
	}
}

// record checks one stored version: within its limit, and the very next
// modification of the key after the last one seen.
func (h *history) record(kv *mvccpb.KeyValue) {
	var b quotav1alpha1.AllowanceBucket
	err := json.Unmarshal(kv.Value, &b)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.gaps = append(h.gaps, fmt.Sprintf("revision %d: %v", kv.ModRevision, err))
		return
	}
	if h.lastVer != 0 && kv.Version != h.lastVer+1 {
		h.gaps = append(h.gaps, fmt.Sprintf("key version %d follows %d (revision %d after %d): a stored version was not seen", kv.Version, h.lastVer, kv.ModRevision, h.lastRev))
	}
	h.lastRev, h.lastVer = kv.ModRevision, kv.Version
	h.versions++
	var reserved int64
	for _, r := range b.Status.Reservations {
		reserved += r.Amount
	}
	used := b.Status.Allocated + max(reserved, b.Status.Reserved)
	h.maxUsed = max(h.maxUsed, used)
	var held []string
	for _, r := range b.Status.Reservations {
		held = append(held, fmt.Sprintf("%s(%s)", r.ID, r.Object.Name))
	}
	h.log = append(h.log, fmt.Sprintf("revision %d: limit %d allocated %d claimCount %d reserved %d %v",
		kv.ModRevision, b.Status.Limit, b.Status.Allocated, b.Status.ClaimCount, max(reserved, b.Status.Reserved), held))
	if used > b.Status.Limit {
		h.violations = append(h.violations, fmt.Sprintf("revision %d: allocated %d + reserved %d (%d reservations) > limit %d",
			kv.ModRevision, b.Status.Allocated, max(reserved, b.Status.Reserved), len(b.Status.Reservations), b.Status.Limit))
	}
}

func (h *history) gap(msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gaps = append(h.gaps, msg)
}

// stop ends the watch once it has caught up with etcd's current revision of
// the key, and fails the test on any version over the limit or missed.
func (h *history) stop(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := h.cli.Get(ctx, h.key)
	for err == nil && len(resp.Kvs) == 1 {
		h.mu.Lock()
		caught := h.lastRev >= resp.Kvs[0].ModRevision
		h.mu.Unlock()
		if caught || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("etcd: %v", err)
	}
	h.cancel()
	<-h.done
	_ = h.cli.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	t.Logf("bucket history: %d stored versions, consecutive (watch started again %d times; etcd's client also resumes a broken stream by itself), most used %d", h.versions, h.resumed, h.maxUsed)
	if err == nil && (len(resp.Kvs) != 1 || h.lastRev < resp.Kvs[0].ModRevision) {
		t.Errorf("the watch did not reach the bucket's current revision (last seen %d)", h.lastRev)
	}
	if len(h.gaps) > 0 {
		t.Errorf("bucket history incomplete:\n%v", h.gaps)
	}
	if len(h.violations) > 0 {
		t.Errorf("bucket over its limit in %d of %d stored versions:\n%v\nevery version:\n%s", len(h.violations), h.versions, h.violations, strings.Join(h.log, "\n"))
	}
}
