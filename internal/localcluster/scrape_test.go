package localcluster_test

import (
	"maps"
	"math"
	"strings"
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/localcluster"
)

// A histogram's buckets as Prometheus's text format exposes them: the
// le="+Inf" line is the sample count and is counted once (counting it as a
// bucket too doubled the total, and put every p99 past the last bound).
func TestBucketsOfAScrapedHistogram(t *testing.T) {
	const text = `# HELP h_seconds a histogram
# TYPE h_seconds histogram
h_seconds_bucket{le="0.01"} 3
h_seconds_bucket{le="0.1"} 7
h_seconds_bucket{le="+Inf"} 8
h_seconds_sum 1.2
h_seconds_count 8
`
	m, err := localcluster.ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[float64]uint64{0.01: 3, 0.1: 7, math.Inf(1): 8}
	if got := m.Buckets("h_seconds"); !maps.Equal(got, want) {
		t.Fatalf("buckets %v, want %v", got, want)
	}
	if got := m.Buckets("absent_seconds"); len(got) != 0 {
		t.Fatalf("buckets of a histogram not exported: %v", got)
	}
}
