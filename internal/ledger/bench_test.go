package ledger_test

import (
	"context"
	"math"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// Each iteration reserves amount 1 under a fresh claim id and releases it, so
// buckets never fill up and never grow: the figure is one admission plus one
// release at steady state.
func BenchmarkMemoryReserve(b *testing.B) {
	for _, bc := range []struct {
		name    string
		buckets int
	}{{"1bucket", 1}, {"10kbuckets", 10_000}} {
		b.Run(bc.name, func(b *testing.B) {
			l, reqs := benchLedger(b, bc.buckets)
			b.Run("serial", func(b *testing.B) {
				b.ReportAllocs()
				for i := range b.N {
					reserveRelease(b, l, reqs[i%len(reqs)], "s"+strconv.Itoa(i))
				}
			})
			b.Run("parallel", func(b *testing.B) {
				b.ReportAllocs()
				var n atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := int(n.Add(1))
						reserveRelease(b, l, reqs[i%len(reqs)], "p"+strconv.Itoa(i))
					}
				})
			})
		})
	}
}

func benchLedger(b *testing.B, buckets int) (*ledger.Ledger, [][]ledger.Request) {
	grants := ledger.NewGrantSet()
	l := ledger.New(ledger.NewMemoryStore(), grants)
	reqs := make([][]ledger.Request, buckets)
	for i := range reqs {
		p := project("p" + strconv.Itoa(i))
		if err := grants.Set(ledger.Grant{ID: ledger.GrantID("quota", p.Name, 0), Consumer: p, ResourceType: rtProjects, Amount: math.MaxInt64 / 2}); err != nil {
			b.Fatal(err)
		}
		reqs[i] = []ledger.Request{req(p, rtProjects, 1, nil)}
		reserveRelease(b, l, reqs[i], "warmup") // create the bucket outside the timer
	}
	return l, reqs
}

func reserveRelease(b *testing.B, l *ledger.Ledger, reqs []ledger.Request, id string) {
	ctx := context.Background()
	c := ledger.Claim{ID: id, Requests: reqs}
	d, err := l.Reserve(ctx, c)
	if err != nil || !d.Granted {
		b.Fatalf("reserve %s: granted=%v err=%v", id, d.Granted, err)
	}
	if err := l.Release(ctx, c); err != nil {
		b.Fatal(err)
	}
}
