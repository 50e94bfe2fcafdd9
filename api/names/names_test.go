package names

import (
	"strings"
	"testing"
)

var scheme = Scheme{Tag: "test/v1", Fallback: "thing", PrefixMax: 8, HashBytes: 4}

func TestNameIsAReadablePrefixAndAHash(t *testing.T) {
	hashOfX := strings.TrimPrefix(scheme.Name("", "x"), "thing-")
	if len(hashOfX) != 2*scheme.HashBytes {
		t.Fatalf("hash %q, want %d hex characters", hashOfX, 2*scheme.HashBytes)
	}
	for _, tc := range []struct{ readable, prefix string }{
		{"example.com/CPU", "example-c"}, // PrefixMax 8, plus the character after a dash
		{"a..b--c", "a-b-c"},
		{"../", "thing"},
		{"", "thing"},
		{"abcdefgh.i", "abcdefgh"},
	} {
		got := scheme.Name(tc.readable, "x")
		if want := tc.prefix + "-" + hashOfX; got != want {
			t.Errorf("Name(%q) = %q, want %q", tc.readable, got, want)
		}
	}
}

// Fields that concatenate, or join with a separator byte, to the same text
// still hash apart; so do schemes with different tags.
func TestFieldsAreLengthPrefixed(t *testing.T) {
	seen := map[string]string{}
	for _, fields := range [][]string{{"ab", ""}, {"a", "b"}, {"", "ab"}, {"ab"}, {"a\x00b"}, {"a", "\x00b"}} {
		name := scheme.Name("", fields...)
		if prev, ok := seen[name]; ok {
			t.Fatalf("%q and %q share name %s", prev, fields, name)
		}
		seen[name] = strings.Join(fields, "|")
	}
	other := scheme
	other.Tag = "test/v2"
	if other.Name("", "a") == scheme.Name("", "a") {
		t.Fatal("the tag is not hashed")
	}
}
