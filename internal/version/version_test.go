package version

import (
	"runtime"
	"testing"
)

func TestString(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v1.2.3"
	want := "quotactl v1.2.3 (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	if got := String("quotactl"); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}
