package main

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.1, time.Millisecond}} {
		if got := percentile(ds, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("percentile sorted its argument in place")
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
	one := []time.Duration{7 * time.Second}
	if percentile(one, 50) != 7*time.Second || percentile(one, 99) != 7*time.Second {
		t.Error("one value is every percentile")
	}
	// Nearest rank on 3 values: p50 is the 2nd, p99 the 3rd.
	three := []time.Duration{3, 1, 2}
	if percentile(three, 50) != 2 || percentile(three, 99) != 3 {
		t.Errorf("p50 %v p99 %v of 1,2,3", percentile(three, 50), percentile(three, 99))
	}
}

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		a, b         float64
		haveA, haveB bool
		want         string
	}{
		{347, 11, true, true, "31.55"},
		{11, 347, true, true, "0.03"},
		{5, 5, true, true, "1.00"},
		{5, 0, true, true, "n/a"},
		{0, 5, true, true, "0.00"},
		{5, 5, false, true, "n/a"},
		{5, 5, true, false, "n/a"},
	} {
		if got := ratio(tc.a, tc.b, tc.haveA, tc.haveB); got != tc.want {
			t.Errorf("ratio(%v, %v, %v, %v) = %q, want %q", tc.a, tc.b, tc.haveA, tc.haveB, got, tc.want)
		}
	}
	if got := rate(100, 4*time.Second); got != 25 {
		t.Errorf("rate = %v", got)
	}
	if got := rate(100, 0); got != 0 {
		t.Errorf("rate over no time = %v", got)
	}
}

func TestErrorTally(t *testing.T) {
	var tally errorTally
	tally.add(`configmaps "cm-3" is forbidden: available 412 of 1000`, "load-c-1", "cm-3")
	tally.add(`Post "https://127.0.0.1:4431/v1/admit": context deadline exceeded`, "load-c-2", "cm-4")
	tally.add(`configmaps "cm-9" is forbidden: available 415 of 1000`, "load-c-7", "cm-9")
	tally.add(`Post "https://127.0.0.1:4431/v1/admit": context deadline exceeded`, "load-c-2", "cm-5")
	tally.add(`Post "https://127.0.0.1:4431/v1/admit": context deadline exceeded`, "load-c-2", "cm-6")
	if tally.total() != 5 {
		t.Fatalf("total %d, want 5", tally.total())
	}
	got := tally.top(5, 40)
	want := []string{
		`3× Post "https://127.0.0.1:4431/v1/admit": …`,
		`2× configmaps "cm-3" is forbidden: availabl…`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("top:\n%q\nwant\n%q", got, want)
	}
	if got := tally.top(1, 1000); len(got) != 1 {
		t.Fatalf("top(1) gave %d groups", len(got))
	}
	var wide errorTally
	wide.add("ééé", "", "")
	if got := wide.top(1, 2); got[0] != "1× éé…" {
		t.Fatalf("cut inside a character: %q", got[0])
	}
	var empty errorTally
	if empty.total() != 0 || len(empty.top(3, 10)) != 0 {
		t.Fatal("an empty tally reports nothing")
	}
}

func TestMs(t *testing.T) {
	if got := ms(1500 * time.Millisecond); got != "1500ms" {
		t.Errorf("ms = %q", got)
	}
	if got := ms(12300 * time.Millisecond); got != "12.3s" {
		t.Errorf("ms = %q", got)
	}
}

// The provider's p99 is read from its histogram's change over phase (c):
// interpolated inside the bucket that holds the rank, as Prometheus's
// histogram_quantile does; observations from before the phase do not count.
func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	before := map[float64]uint64{0.01: 50, 0.02: 50, 0.04: 50, inf: 50}
	// 100 observations in the phase: 60 up to 10ms, 30 in (10ms, 20ms],
	// 9 in (20ms, 40ms], 1 above 40ms.
	after := map[float64]uint64{0.01: 110, 0.02: 140, 0.04: 149, inf: 150}
	for _, tc := range []struct {
		q, want float64
	}{
		{0.5, 0.01 * 50 / 60},     // inside the first bucket, from 0
		{0.9, 0.02},               // the 90th is the last of (10ms, 20ms]
		{0.75, 0.01 + 0.01*15/30}, // halfway into (10ms, 20ms]
		{0.99, 0.04},              // the 99th is the last of (20ms, 40ms]
		{1, 0.04},                 // in +Inf: at least the highest bound
		{0.95, 0.02 + 0.02*5/9},   // five of nine into (20ms, 40ms]
	} {
		got, ok := histogramQuantile(tc.q, before, after)
		if !ok || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("q%v = %v (%v), want %v", tc.q, got, ok, tc.want)
		}
	}
	if _, ok := histogramQuantile(0.99, after, after); ok {
		t.Error("a quantile of no observations")
	}
	if _, ok := histogramQuantile(0.99, nil, nil); ok {
		t.Error("a quantile of a histogram never scraped")
	}
}
