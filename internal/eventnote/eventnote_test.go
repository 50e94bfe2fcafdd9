package eventnote

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFit(t *testing.T) {
	if got := Fit("short"); got != "short" {
		t.Errorf("Fit(short) = %q", got)
	}
	exact := strings.Repeat("a", Limit)
	if got := Fit(exact); got != exact {
		t.Errorf("a note of exactly %d bytes was cut to %d", Limit, len(got))
	}
	long := strings.Repeat("a", Limit-4) + "é" + strings.Repeat("b", 10)
	got := Fit(long)
	if len(got) > Limit || !utf8.ValidString(got) || !strings.HasSuffix(got, "...") {
		t.Fatalf("Fit cut to %d bytes, valid UTF-8 %v, suffix %q", len(got), utf8.ValidString(got), got[len(got)-3:])
	}
	if want := strings.Repeat("a", Limit-4) + "..."; got != want {
		t.Errorf("Fit cut inside the rune é: got ...%q", got[len(got)-8:])
	}
	if got := FitIn("abcdefgh", 6); got != "abc..." {
		t.Errorf("FitIn(abcdefgh, 6) = %q, want abc...", got)
	}
}
