package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/version"
)

// opaEnv is the process's Env, as main registers it.
var opaEnv atomic.Pointer[builtins.Env]

func TestMain(m *testing.M) {
	if err := builtins.Register(opaEnv.Load); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// quotactl runs the command in-process and returns its exit code and output.
func quotactl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), &opaEnv, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestVerifyPassesOnTheShippedTemplates(t *testing.T) {
	code, out, errOut := quotactl(t, "verify", "../../templates/")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	want := "ok\t../../templates/quotaallocation/suite.yaml"
	if !strings.Contains(out, want) || !strings.Contains(out, "ok\t../../templates/quotaentity/suite.yaml") || !strings.HasSuffix(out, "PASS\n\n") {
		t.Errorf("output:\n%s", out)
	}
}

func TestVerifyFailsOnAFailingSuite(t *testing.T) {
	code, out, errOut := quotactl(t, "verify", "internal/suite/testdata/failing.yaml")
	if code != 1 || errOut != "quotactl: FAIL\n" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out, "--- FAIL: wrong-decision") || !strings.Contains(out, "FAIL\tinternal/suite/testdata/failing.yaml") {
		t.Errorf("output:\n%s", out)
	}
}

func TestVerifyRejectsAPathWithoutSuites(t *testing.T) {
	code, _, errOut := quotactl(t, "verify", "../../rego/testdata")
	if code != 1 || errOut != "quotactl: no suites (kind Suite, apiVersion test.gatekeeper.sh/v1alpha1) in ../../rego/testdata\n" {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// rego/capabilities.json is what `quotactl capabilities` prints.
func TestCapabilitiesFileIsFresh(t *testing.T) {
	code, out, errOut := quotactl(t, "capabilities")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	file, err := os.ReadFile("../../rego/capabilities.json")
	if err != nil {
		t.Fatal(err)
	}
	if out != string(file) {
		t.Error("rego/capabilities.json is stale: run `go run ./cmd/quotactl capabilities > rego/capabilities.json`")
	}
	for _, name := range []string{`"name": "quota.reserve"`, `"name": "quota.usage"`, `"name": "quota.quantity"`} {
		if strings.Count(out, name) != 1 {
			t.Errorf("%s appears %d times", name, strings.Count(out, name))
		}
	}
}

func TestGenerateCheckDetectsStaleTemplates(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := quotactl(t, "generate", "--dir", dir); code != 0 {
		t.Fatalf("generate: exit %d: %s", code, errOut)
	}
	if code, _, errOut := quotactl(t, "generate", "--check", "--dir", dir); code != 0 {
		t.Fatalf("check after generate: exit %d: %s", code, errOut)
	}
	stale := filepath.Join(dir, "quotaentity", "template.yaml")
	if err := os.WriteFile(stale, []byte("# edited by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := quotactl(t, "generate", "--check", "--dir", dir)
	want := "stale: " + stale + "\nquotactl: generated templates are stale; run 'quotactl generate'\n"
	if code != 1 || errOut != want {
		t.Errorf("exit %d, stderr %q; want exit 1, %q", code, errOut, want)
	}
	if b, _ := os.ReadFile(stale); string(b) != "# edited by hand\n" {
		t.Error("--check wrote the file")
	}
	// The committed templates are fresh.
	if code, _, errOut := quotactl(t, "generate", "--check", "--dir", "../../templates"); code != 0 {
		t.Errorf("templates/ is stale: %s", errOut)
	}
}

// The Rego library's tests pass against the real builtins, and the ones that
// reserve depend on the --quota ledger (without it they fail).
func TestOPATestRunsTheRegoTestsWithTheRealBuiltins(t *testing.T) {
	if code, out, errOut := quotactl(t, "opa", "test", "--quota", "../../rego/testdata/quota.yaml", "../../rego/"); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if code, _, _ := quotactl(t, "opa", "test", "--run", "test_real_", "../../rego/"); code == 0 {
		t.Error("the real-builtin tests passed without their grants")
	}
}

func TestVersion(t *testing.T) {
	want := version.String("quotactl") + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errOut := quotactl(t, args...)
		if code != 0 || out != want || errOut != "" {
			t.Errorf("quotactl %v: exit %d, stdout %q, stderr %q; want stdout %q", args, code, out, errOut, want)
		}
	}
}
