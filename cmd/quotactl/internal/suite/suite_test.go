package suite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/verify"

	"github.com/quotakeeper/quotakeeper/cmd/quotactl/internal/suite"
	"github.com/quotakeeper/quotakeeper/internal/builtins"
)

// TestMain registers the builtins with no process Env: every case's
// reviews carry their own.
func TestMain(m *testing.M) {
	if err := builtins.Register(nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// run reads and runs one suite file of testdata.
func run(t *testing.T, file string) verify.SuiteResult {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	fsys := os.DirFS("/")
	suites, err := suite.Read(fsys, strings.TrimPrefix(abs, "/"), "testdata/"+file, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(suites) != 1 {
		t.Fatalf("%d suites, want 1", len(suites))
	}
	r, err := suite.NewRunner(fsys, false)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := verify.NewFilter("")
	return r.Run(context.Background(), all, suites[0])
}

// outcomes maps "test/case" to "" (passed), "skipped" or the error text.
func outcomes(r verify.SuiteResult) map[string]string {
	out := map[string]string{}
	for _, tr := range r.TestResults {
		if tr.Error != nil {
			out[tr.Name] = tr.Error.Error()
		}
		for _, cr := range tr.CaseResults {
			switch {
			case cr.Skipped:
				out[tr.Name+"/"+cr.Name] = "skipped"
			case cr.Error != nil:
				out[tr.Name+"/"+cr.Name] = cr.Error.Error()
			default:
				out[tr.Name+"/"+cr.Name] = ""
			}
		}
	}
	return out
}

func assertOutcomes(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: not run", k)
		} else if g != w {
			t.Errorf("%s:\n got %q\nwant %q", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected result %q", k, got[k])
		}
	}
}

func TestStandardGatorSuitesRunUnchanged(t *testing.T) {
	assertOutcomes(t, outcomes(run(t, "standard.yaml")), map[string]string{
		"standard/audit-of-a-plain-object":        "",
		"standard/admission-review-without-quota": "",
	})
}

var freshLedgerOutcomes = map[string]string{
	"fresh-ledger/first":  "",
	"fresh-ledger/second": "",
	"fresh-ledger/steps":  "",
}

func TestEveryCaseGetsAFreshLedgerAndStepsShareIt(t *testing.T) {
	assertOutcomes(t, outcomes(run(t, "fresh-ledger.yaml")), freshLedgerOutcomes)
}

var observedOutcomes = map[string]string{
	"observed/create-deny-delete-create":  "",
	"observed/decided-by-a-second-review": "",
}

func TestAdmittedObjectsCountDeletedOnesStop(t *testing.T) {
	assertOutcomes(t, outcomes(run(t, "observed.yaml")), observedOutcomes)
}

// Issue 26: runs may overlap. Each case's reviews carry the case's own
// ledger (builtins.WithEnv), so suites run at once, three times over, each
// give the outcomes they give alone (cases that fill their ledger and
// expect denials, and cases that measure in a ledger of their own).
func TestRunsMayOverlap(t *testing.T) {
	for i := range 3 {
		for file, want := range map[string]map[string]string{"fresh-ledger.yaml": freshLedgerOutcomes, "observed.yaml": observedOutcomes} {
			t.Run(fmt.Sprintf("%s#%d", file, i), func(t *testing.T) {
				t.Parallel()
				assertOutcomes(t, outcomes(run(t, file)), want)
			})
		}
	}
}

func TestFailuresSayWhichStepAndWhatWasSeen(t *testing.T) {
	abs, _ := filepath.Abs("testdata")
	assertOutcomes(t, outcomes(run(t, "failing.yaml")), map[string]string{
		"failing/wrong-decision": `step 2 (expected to pass): unexpected number of violations: got 1 violations but want none: ` +
			`got messages [quota exceeded for Namespace team-a: requested 1 of core/configmaps, available 0 of 1 (allocated 1, reserved 0); see EffectiveResourceGrant team-a/core-configmaps-b02b34a3762b30e2 (kubectl quota usage -n team-a)]`,
		"failing/wrong-usage": "usage of /Namespace /team-a core/configmaps{}: reserved 0, want 1",
		"failing/grant-against-the-registration": "quota: " + abs[1:] + "/quota.yaml: ResourceGrant team-a/configmaps: " +
			`spec.consumerRef: Invalid value: "Namespace": resource type "core/configmaps" is consumed by resourcemanager.miloapis.com/Organization (ResourceRegistration "configmaps-per-organization")`,
		"failing/missing-object-file":        "object: open " + abs[1:] + "/cm-9.yaml: no such file or directory",
		"failing/scale-without-its-resource": "admission.resource: required for a Scale: the resource it scales, e.g. {group: apps, version: v1, resource: deployments}",
	})
}

func TestReadReportsMistakesByPath(t *testing.T) {
	abs, err := filepath.Abs(filepath.Join("testdata", "malformed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = suite.Read(os.DirFS("/"), strings.TrimPrefix(abs, "/"), "testdata/malformed.yaml", false)
	want := "testdata/malformed.yaml: unknown fields: tests[0].cases[0].admision, tests[0].cases[0].assertions[0].mesage"
	if err == nil || err.Error() != want {
		t.Errorf("error:\n got %v\nwant %s", err, want)
	}

	// Once spelt right, structural mistakes are all reported, each with its path.
	data, err := os.ReadFile(abs)
	if err != nil {
		t.Fatal(err)
	}
	fixed := strings.NewReplacer("admision", "admission", "mesage", "message").Replace(string(data))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "suite.yaml"), []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = suite.Read(os.DirFS("/"), strings.TrimPrefix(dir, "/")+"/suite.yaml", dir+"/suite.yaml", false)
	want = dir + "/suite.yaml: " + strings.Join([]string{
		"tests[0].cases[1]: steps and object/admission/assertions are mutually exclusive: put them in the steps",
		"tests[0].cases[1].steps[0].assertions: required: state the expected decision of every step",
		"tests[0].cases[1].steps[0].admission.operation: must be one of CREATE, UPDATE, DELETE, CONNECT, got \"PATCH\"",
		"tests[0].cases[1].steps[0].admission.oldObject: only for UPDATE and DELETE",
		"tests[0].cases[2].usage[0].consumer.name: required",
		"tests[0].cases[2].usage[0]: expect at least one of limit, allocated, reserved, available",
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("error:\n got %v\nwant %s", err, want)
	}
}
