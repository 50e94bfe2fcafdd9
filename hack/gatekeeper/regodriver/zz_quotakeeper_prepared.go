//go:build quotakeeper_overlay

// This file is laid over the frameworks' Rego driver package in Gatekeeper's
// build (hack/gatekeeper/overlay.sh), with the driver's own eval renamed
// evalEachTime in its driver.go. It is the same evaluation with the query
// prepared once per template compiler instead of for every review.
//
// The frameworks driver builds its query again for every review and every
// constraint kind (rego.New with the template's compiler, then Eval): the
// query is parsed, compiled against the compiler and planned each time,
// about a fifth of what a quota template's admission costs in Gatekeeper
// (docs/operations.md, "Where the time goes"). Our observer's driver
// (internal/preparedrego) prepares once; this brings Gatekeeper the same with
// nothing else changed: the compiler, store, print settings, external_data
// (registered globally by the driver) and tracing are the driver's own, and
// a template replaced or removed gets a new compiler, so its prepared query
// is never reused.
package rego

import (
	"bytes"
	"context"
	"strings"
	"sync"

	"github.com/open-policy-agent/frameworks/constraint/pkg/client/reviews"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/topdown"
	"k8s.io/utils/ptr"
)

// eval answers as the driver's own (evalEachTime) does: the results of the
// query at path under input, and the trace when tracing is on.
func (d *Driver) eval(ctx context.Context, compiler *ast.Compiler, target string, path []string, input ast.Value, opts ...reviews.ReviewOpt) (rego.ResultSet, *string, error) {
	cfg := &reviews.ReviewCfg{}
	for _, opt := range opts {
		opt(cfg)
	}

	store, err := d.storage.getStorage(ctx, target)
	if err != nil {
		return nil, nil, err
	}

	query, err := preparedQueriesOf(d).get(ctx, d, preparedKey{
		compiler: compiler,
		store:    store,
		query:    strings.Join(append([]string{"data"}, path...), "."),
	})
	if err != nil {
		return nil, nil, err
	}

	evalOpts := []rego.EvalOption{rego.EvalParsedInput(input)}
	tracing := d.traceEnabled || cfg.TracingEnabled
	var buf *topdown.BufferTracer
	if tracing {
		buf = topdown.NewBufferTracer()
		evalOpts = append(evalOpts, rego.EvalQueryTracer(buf))
	}

	res, err := query.Eval(ctx, evalOpts...)

	var trace *string
	if tracing {
		b := &bytes.Buffer{}
		topdown.PrettyTrace(b, *buf)
		trace = ptr.To(b.String())
	}
	return res, trace, err
}

// preparedKey is what a prepared query depends on besides the driver's
// print settings, which are fixed when the driver is made.
type preparedKey struct {
	compiler *ast.Compiler
	store    storage.Store
	query    string
}

// preparedQueries holds one driver's prepared queries, only for compilers
// the driver still holds (a replaced template's entry goes at the next
// preparation), so it stays as large as the set of templates.
type preparedQueries struct {
	mtx     sync.RWMutex
	queries map[preparedKey]rego.PreparedEvalQuery
}

// byDriver keeps each driver's prepared queries beside it rather than in a
// field, so that the driver's own file changes by one name only. A process
// makes a handful of drivers (Gatekeeper one per client).
var byDriver sync.Map // *Driver → *preparedQueries

func preparedQueriesOf(d *Driver) *preparedQueries {
	if q, ok := byDriver.Load(d); ok {
		return q.(*preparedQueries)
	}
	q, _ := byDriver.LoadOrStore(d, &preparedQueries{queries: map[preparedKey]rego.PreparedEvalQuery{}})
	return q.(*preparedQueries)
}

// get returns key's prepared query, preparing it on first use. Two reviews
// racing to prepare the same query both do; one result is kept.
func (p *preparedQueries) get(ctx context.Context, d *Driver, key preparedKey) (rego.PreparedEvalQuery, error) {
	p.mtx.RLock()
	query, ok := p.queries[key]
	p.mtx.RUnlock()
	if ok {
		return query, nil
	}

	query, err := rego.New(
		rego.Compiler(key.compiler),
		rego.Store(key.store),
		rego.Query(key.query),
		rego.EnablePrintStatements(d.printEnabled),
		rego.PrintHook(d.printHook),
		rego.SetRegoVersion(ast.RegoV0),
	).PrepareForEval(ctx)
	if err != nil {
		return query, err
	}

	held := map[*ast.Compiler]bool{}
	for _, compilers := range d.compilers.list() {
		for _, compiler := range compilers {
			held[compiler] = true
		}
	}
	p.mtx.Lock()
	defer p.mtx.Unlock()
	for k := range p.queries {
		if !held[k.compiler] {
			delete(p.queries, k)
		}
	}
	// Dump evaluates against a compiler made for the call: not kept.
	if held[key.compiler] {
		p.queries[key] = query
	}
	return query, nil
}
