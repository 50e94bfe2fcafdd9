package checkout_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/checkout"
)

func TestRootIsFoundFromTheWorkingDirectory(t *testing.T) {
	root, err := checkout.Root()
	if err != nil {
		t.Fatal(err)
	}
	// This package's directory is internal/checkout under the root.
	wd, _ := os.Getwd()
	if want := filepath.Dir(filepath.Dir(wd)); root != want {
		t.Fatalf("root %s, want %s", root, want)
	}
	t.Chdir(t.TempDir())
	if _, err := checkout.Root(); err == nil || !strings.Contains(err.Error(), "not inside a quotakeeper checkout") {
		t.Fatalf("outside a checkout: %v", err)
	}
	t.Setenv(checkout.RootEnv, root)
	if got, err := checkout.Root(); err != nil || got != root {
		t.Fatalf("with %s: %s, %v", checkout.RootEnv, got, err)
	}
}
