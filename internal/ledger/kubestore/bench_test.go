package kubestore_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledger/kubestore"
)

// reserveLoad makes n reservations from workers goroutines against one bucket
// with room for all of them, through a fresh Store with the given batch
// bound, and returns the elapsed time and the status writes it took.
func reserveLoad(tb testing.TB, n, workers, maxBatch int) (time.Duration, int64) {
	tb.Helper()
	ctx := context.Background()
	consumer := org(unique("bench"))
	grants := ledger.NewGrantSet()
	if err := grants.Set(grant("quotakeeper-system/bench#0", consumer, projects, math.MaxInt32)); err != nil {
		tb.Fatal(err)
	}
	store := kubestore.New(newClient(tb), kubestore.Options{MaxBatch: maxBatch})
	l := ledger.New(store, grants)
	// Create the bucket first so both modes measure steady-state writes.
	if _, err := l.Refresh(ctx, ledger.NewBucketKey(consumer, projects, nil)); err != nil {
		tb.Fatal(err)
	}
	writesBefore, _ := store.Stats()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				d, err := l.Reserve(ctx, claim(fmt.Sprintf("%s-%d", consumer.Name, i), req(consumer, 1)))
				if err != nil || !d.Granted {
					tb.Errorf("reservation %d: granted=%v err=%v", i, d.Granted, err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	writes, _ := store.Stats()
	return elapsed, writes - writesBefore
}

// BenchmarkKubeStoreReserve reports reservations per second and status writes
// per reservation on a real apiserver, 32 concurrent callers on one bucket,
// with group commit and with one write per reservation.
func BenchmarkKubeStoreReserve(b *testing.B) {
	for _, mode := range []struct {
		name     string
		maxBatch int
	}{{"group-commit", 0}, {"one-write-each", 1}} {
		b.Run(mode.name, func(b *testing.B) {
			elapsed, writes := reserveLoad(b, b.N, 32, mode.maxBatch)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "reservations/s")
			b.ReportMetric(float64(writes)/float64(b.N), "writes/reservation")
		})
	}
}

// BenchmarkKubeStoreGroupCommitRatio makes b.N reservations both ways back to
// back, so the ratio is measured on one machine in one moment: how many times
// faster, and how many times fewer status writes, group commit is.
func BenchmarkKubeStoreGroupCommitRatio(b *testing.B) {
	batched, batchedWrites := reserveLoad(b, b.N, 32, 0)
	single, singleWrites := reserveLoad(b, b.N, 32, 1)
	b.ReportMetric(single.Seconds()/batched.Seconds(), "x-throughput")
	b.ReportMetric(float64(singleWrites)/float64(max(batchedWrites, 1)), "x-fewer-writes")
}
