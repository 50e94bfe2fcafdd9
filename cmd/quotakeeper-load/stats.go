package main

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
)

// percentile is the nearest-rank percentile (0 < p ≤ 100) of durations; zero
// for none. It sorts a copy.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	// Nearest rank: the smallest value with at least p% of the values at or
	// below it.
	rank := int(float64(len(s))*p/100 + 0.999999999)
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// rate is n per second of wall; zero when wall is zero.
func rate(n int, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return float64(n) / wall.Seconds()
}

// ratio renders a/b with two decimals, or "n/a" when either side was not
// measured or b is zero: a missing phase must not read as a ratio of 0.
func ratio(a, b float64, haveA, haveB bool) string {
	if !haveA || !haveB || b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// errorTally groups error messages that differ only in object names or
// numbers, keeping the first message of each group as its example, in the
// order the groups were first seen.
type errorTally struct {
	order []string
	count map[string]int
	first map[string]string
}

var digits = regexp.MustCompile(`[0-9]+`)

// errorKey is msg with the object's namespace and name and every run of
// digits replaced, so that "configmaps "cm-3" ... 412 of 1000" and
// "configmaps "cm-9" ... 415 of 1000" count as one kind of failure.
func errorKey(msg, namespace, name string) string {
	if name != "" {
		msg = strings.ReplaceAll(msg, name, "<name>")
	}
	if namespace != "" {
		msg = strings.ReplaceAll(msg, namespace, "<ns>")
	}
	return digits.ReplaceAllString(msg, "#")
}

func (t *errorTally) add(msg, namespace, name string) {
	if t.count == nil {
		t.count, t.first = map[string]int{}, map[string]string{}
	}
	k := errorKey(msg, namespace, name)
	if _, ok := t.count[k]; !ok {
		t.order = append(t.order, k)
		t.first[k] = msg
	}
	t.count[k]++
}

// total is the number of errors added.
func (t *errorTally) total() int {
	n := 0
	for _, c := range t.count {
		n += c
	}
	return n
}

// top returns up to n groups as "count× example", most frequent first (ties
// in first-seen order), each example cut to width characters (runes).
func (t *errorTally) top(n, width int) []string {
	keys := slices.Clone(t.order)
	slices.SortStableFunc(keys, func(a, b string) int { return t.count[b] - t.count[a] })
	var out []string
	for _, k := range keys[:min(n, len(keys))] {
		msg := t.first[k]
		if r := []rune(msg); len(r) > width {
			msg = string(r[:width]) + "…"
		}
		out = append(out, fmt.Sprintf("%d× %s", t.count[k], msg))
	}
	return out
}

// ms renders a duration in milliseconds, or seconds above ten of them.
func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

// histogramQuantile is the q-quantile (0 < q ≤ 1) of the observations a
// Prometheus histogram made between two scrapes (cumulative counts by upper
// bound, +Inf holding the total, as localcluster.Metrics.Buckets reads
// them), interpolated linearly inside the bucket that holds it, as
// Prometheus's histogram_quantile does. ok is false when there were none.
// A quantile in the +Inf bucket is the highest finite bound: at least that.
func histogramQuantile(q float64, before, after map[float64]uint64) (seconds float64, ok bool) {
	bounds := slices.Sorted(maps.Keys(after))
	delta := func(b float64) float64 { return float64(after[b] - min(before[b], after[b])) }
	if len(bounds) == 0 || delta(bounds[len(bounds)-1]) == 0 {
		return 0, false
	}
	rank := q * delta(bounds[len(bounds)-1])
	lower, below := 0.0, 0.0
	for _, b := range bounds {
		n := delta(b)
		if n >= rank && n > below {
			if math.IsInf(b, 1) {
				return lower, true
			}
			return lower + (b-lower)*(rank-below)/(n-below), true
		}
		lower, below = b, n
	}
	return lower, true
}
