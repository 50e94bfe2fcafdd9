package celpolicy

import (
	"strings"
	"testing"
)

// FuzzSplitTemplate checks the {{ expr }} splitter: joining the segments as
// written reproduces the input; literal segments are non-empty and hold no
// "{{"; expression segments are braced, hold a non-empty expression that is
// their trimmed inside (less the leading dot of the {{.x}} form), and split
// alone give back just themselves. A string with no "{{" is one literal.
func FuzzSplitTemplate(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		segs, err := splitTemplate(s)
		if err != nil {
			if !IsTemplate(s) {
				t.Fatalf("%q has no {{ but failed to split: %v", s, err)
			}
			return
		}
		var joined strings.Builder
		exprs := 0
		for i, seg := range segs {
			joined.WriteString(seg.written)
			if !seg.expr {
				if seg.text != seg.written || seg.text == "" || strings.Contains(seg.text, "{{") {
					t.Fatalf("%q: bad literal segment %d: %#v", s, i, seg)
				}
				continue
			}
			exprs++
			inner, open := strings.CutPrefix(seg.written, "{{")
			inner, closed := strings.CutSuffix(inner, "}}")
			if !open || !closed {
				t.Fatalf("%q: expression segment %d not braced: %q", s, i, seg.written)
			}
			want := strings.TrimSpace(inner)
			if dotted := strings.TrimPrefix(want, "."); dotted != want && dotted != "" && isIdentStart(dotted[0]) {
				want = dotted
			}
			if seg.text == "" || seg.text != want {
				t.Fatalf("%q: segment %d text %q, want %q", s, i, seg.text, want)
			}
			alone, err := splitTemplate(seg.written)
			if err != nil || len(alone) != 1 || alone[0] != seg {
				t.Fatalf("%q: segment %d (%q) split alone gives %#v, %v", s, i, seg.written, alone, err)
			}
		}
		if joined.String() != s {
			t.Fatalf("joining the segments of %q gives %q", s, joined.String())
		}
		if (exprs > 0) != IsTemplate(s) {
			t.Fatalf("%q: %d expressions but IsTemplate=%v", s, exprs, IsTemplate(s))
		}
	})
}
