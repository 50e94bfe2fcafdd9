package ledger

import (
	"errors"
	"math"
	"testing"
)

func TestCheckedAdd(t *testing.T) {
	for _, tc := range []struct {
		a, b     int64
		want     int64
		overflow bool
	}{
		{3, 2, 5, false},
		{math.MaxInt64, 0, math.MaxInt64, false},
		{math.MaxInt64 - 1, 1, math.MaxInt64, false},
		{math.MaxInt64, 1, 0, true},
		{math.MaxInt64, math.MaxInt64, 0, true},
		{math.MinInt64, -1, 0, true},
		{math.MinInt64, math.MaxInt64, -1, false},
		{-5, 3, -2, false},
	} {
		got, err := Add(tc.a, tc.b)
		if tc.overflow != errors.Is(err, ErrOverflow) || (!tc.overflow && (err != nil || got != tc.want)) {
			t.Errorf("Add(%d, %d) = %d, %v; want %d overflow=%v", tc.a, tc.b, got, err, tc.want, tc.overflow)
		}
	}
}

func TestCheckedSub(t *testing.T) {
	for _, tc := range []struct {
		a, b     int64
		want     int64
		overflow bool
	}{
		{5, 3, 2, false},
		{0, math.MaxInt64, -math.MaxInt64, false},
		{-2, math.MaxInt64, 0, true},
		{math.MaxInt64, -1, 0, true},
		{math.MinInt64, 1, 0, true},
		{math.MaxInt64, math.MaxInt64, 0, false},
	} {
		got, err := Sub(tc.a, tc.b)
		if tc.overflow != errors.Is(err, ErrOverflow) || (!tc.overflow && (err != nil || got != tc.want)) {
			t.Errorf("Sub(%d, %d) = %d, %v; want %d overflow=%v", tc.a, tc.b, got, err, tc.want, tc.overflow)
		}
	}
}

func TestBucketUsageChecked(t *testing.T) {
	b := Bucket{Limit: 10, Reservations: map[string]Reservation{"a": {Amount: math.MaxInt64}, "b": {Amount: 1}}}
	if _, err := b.Reserved(); !errors.Is(err, ErrOverflow) {
		t.Fatalf("Reserved() err = %v, want ErrOverflow", err)
	}
	b = Bucket{Limit: 10, Allocated: math.MaxInt64, Reservations: map[string]Reservation{"r": {Amount: 1}}}
	if _, err := b.Usage(); !errors.Is(err, ErrOverflow) {
		t.Fatalf("Usage() err = %v, want ErrOverflow", err)
	}
	b = Bucket{Limit: 10, Allocated: 4, Reservations: map[string]Reservation{"r": {Amount: 3}}}
	if u, err := b.Usage(); err != nil || u != (Usage{Limit: 10, Allocated: 4, Reserved: 3, Available: 3}) {
		t.Fatalf("Usage() = %+v, %v", u, err)
	}
	b.Limit = 5 // over a lowered limit: available is 0, not negative
	if u, err := b.Usage(); err != nil || u.Available != 0 {
		t.Fatalf("Usage().Available over limit = %d, %v", u.Available, err)
	}
}
