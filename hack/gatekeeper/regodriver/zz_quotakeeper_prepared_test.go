//go:build quotakeeper_overlay

// Laid over the frameworks' Rego driver package beside its own tests (the
// gatekeeper build runs them all with the overlay: make gatekeeper).
package rego

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/open-policy-agent/frameworks/constraint/pkg/client/clienttest/cts"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/reviews"
)

const (
	denyFoo = `package foobar

violation[{"msg": msg}] {
  input.review.foo == "bar"
  msg := sprintf("foo is %v", [input.review.foo])
}
`
	denyFooAgain = `package foobar

violation[{"msg": "foo again"}] {
  input.review.foo == "bar"
}
`
)

// A review answers with the same results and the same trace as the
// driver's own eval, and the prepared query is kept for the next one.
func TestPreparedEvalAnswersAsTheDriversOwn(t *testing.T) {
	ctx := context.Background()
	d := newDriverWith(t, denyFoo)
	compiler := d.compilers.getCompiler(cts.MockTargetHandler, "Fakes")
	constraint := cts.MakeConstraint(t, "Fakes", "foo-1")
	input, err := toParsedInput(cts.MockTargetHandler, []*unstructured.Unstructured{constraint}, map[string]any{"foo": "bar"})
	if err != nil {
		t.Fatal(err)
	}
	path := []string{"hooks", "violation[result]"}

	for _, tracing := range []bool{false, true} {
		got, gotTrace, err := d.eval(ctx, compiler, cts.MockTargetHandler, path, input, reviews.Tracing(tracing))
		if err != nil {
			t.Fatal(err)
		}
		want, wantTrace, err := d.evalEachTime(ctx, compiler, cts.MockTargetHandler, path, input, reviews.Tracing(tracing))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("tracing %v: results differ from the driver's own eval (-want +got):\n%s", tracing, diff)
		}
		if diff := cmp.Diff(wantTrace, gotTrace); diff != "" {
			t.Errorf("tracing %v: trace differs from the driver's own eval (-want +got):\n%s", tracing, diff)
		}
		if len(got) != 1 || got[0].Bindings["result"].(map[string]any)["msg"] != "foo is bar" {
			t.Errorf("tracing %v: results %v, want the one violation \"foo is bar\"", tracing, got)
		}
	}
	if n := len(preparedQueriesOf(d).queries); n != 1 {
		t.Errorf("%d prepared queries after reviews of one template, want 1", n)
	}
}

// A replaced template is evaluated with its new Rego, and a removed one's
// prepared query is dropped: what is kept follows the driver's compilers.
func TestPreparedQueriesFollowTemplates(t *testing.T) {
	ctx := context.Background()
	d := newDriverWith(t, denyFoo)
	query := func(kind string) string {
		t.Helper()
		resp, err := d.Query(ctx, cts.MockTargetHandler, []*unstructured.Unstructured{cts.MakeConstraint(t, kind, "foo-1")}, map[string]any{"foo": "bar"})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Results) != 1 {
			t.Fatalf("%d results, want 1", len(resp.Results))
		}
		return resp.Results[0].Msg
	}
	if got := query("Fakes"); got != "foo is bar" {
		t.Errorf("first template: %q, want %q", got, "foo is bar")
	}

	addTemplate(t, d, denyFooAgain, "Fakes")
	if got := query("Fakes"); got != "foo again" {
		t.Errorf("replaced template: %q, want %q", got, "foo again")
	}
	if n := len(preparedQueriesOf(d).queries); n != 1 {
		t.Errorf("%d prepared queries after the template was replaced, want 1", n)
	}

	addTemplate(t, d, denyFoo, "Others")
	if err := d.RemoveTemplate(ctx, cts.New(cts.OptTargets(cts.Target(cts.MockTargetHandler, denyFooAgain)))); err != nil {
		t.Fatal(err)
	}
	if got := query("Others"); got != "foo is bar" {
		t.Errorf("other template: %q, want %q", got, "foo is bar")
	}
	for key := range preparedQueriesOf(d).queries {
		if key.compiler != d.compilers.getCompiler(cts.MockTargetHandler, "Others") {
			t.Errorf("a prepared query kept for a compiler the driver no longer holds: %s", key.query)
		}
	}

	if _, err := d.Dump(ctx); err != nil {
		t.Fatalf("Dump: %v", err)
	}
	if n := len(preparedQueriesOf(d).queries); n != 1 {
		t.Errorf("%d prepared queries after Dump, want 1 (Dump's compiler is made for the call)", n)
	}
}

// Reviews racing with a template's replacement each answer with one whole
// version of it, never an error (run with -race: make gatekeeper).
func TestPreparedQueriesUnderConcurrentReviewsAndReplacement(t *testing.T) {
	ctx := context.Background()
	d := newDriverWith(t, denyFoo)
	constraints := []*unstructured.Unstructured{cts.MakeConstraint(t, "Fakes", "foo-1")}

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				resp, err := d.Query(ctx, cts.MockTargetHandler, constraints, map[string]any{"foo": "bar"})
				if err != nil {
					errs <- err
					return
				}
				if len(resp.Results) != 1 || (resp.Results[0].Msg != "foo is bar" && resp.Results[0].Msg != "foo again") {
					errs <- fmt.Errorf("results %v, want one violation of either version", resp.Results)
					return
				}
			}
		}()
	}
	for i := range 20 {
		addTemplate(t, d, []string{denyFoo, denyFooAgain}[i%2], "Fakes")
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(preparedQueriesOf(d).queries); n > 1 {
		t.Errorf("%d prepared queries kept for one template, want at most 1", n)
	}
}

func newDriverWith(t *testing.T, rego string) *Driver {
	t.Helper()
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	addTemplate(t, d, rego, "Fakes")
	return d
}

func addTemplate(t *testing.T, d *Driver, rego, kind string) {
	t.Helper()
	ctx := context.Background()
	templ := cts.New(cts.OptTargets(cts.TargetWithVersion(cts.MockTargetHandler, rego, ast.RegoV0)), cts.OptCRDNames(kind))
	if err := d.AddTemplate(ctx, templ); err != nil {
		t.Fatal(err)
	}
	if err := d.AddConstraint(ctx, cts.MakeConstraint(t, kind, "foo-1")); err != nil {
		t.Fatal(err)
	}
}
