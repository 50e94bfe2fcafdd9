// Package preparedrego is a Rego driver for the frameworks constraint client
// whose queries are prepared once per template (OPA's PrepareForEval) and
// evaluated per review with parsed input (rego.EvalParsedInput).
//
// The frameworks' own Rego driver builds and prepares its query again for
// every review (rego.New and Eval with the template's compiler): a quarter
// of what a quota template's review costs (the rego package's
// BenchmarkDriverReview). Gatekeeper
// pays that once per admission and cannot be changed from here; the
// manager's observer pays it once per object it counts, and uses this
// driver. Everything else is the frameworks' and Gatekeeper's: the client
// still matches constraints with Gatekeeper's target, chooses them by
// enforcement point and turns results into responses; templates are parsed
// and rewritten with the frameworks' regorewriter, compiled with the same
// hook module and evaluated with the same input (review, namespaceObject,
// constraint keys, parameters from the store), so a template decides here
// exactly as in Gatekeeper.
package preparedrego

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/open-policy-agent/frameworks/constraint/pkg/apis/constraints"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/drivers"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/drivers/rego/schema"
	clienterrors "github.com/open-policy-agent/frameworks/constraint/pkg/client/errors"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/reviews"
	"github.com/open-policy-agent/frameworks/constraint/pkg/core/templates"
	"github.com/open-policy-agent/frameworks/constraint/pkg/regorewriter"
	"github.com/open-policy-agent/frameworks/constraint/pkg/types"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The frameworks Rego driver's layout, which templates and libraries are
// rewritten into (drivers/rego: templatePath, templateLibPrefix, libRoot,
// hookModuleRego). Kept equal so that rewritten templates and their error
// messages read the same as in Gatekeeper.
const (
	templatePackage = "template"
	libPrefix       = "libs"
	libRoot         = "data.lib"
	hookPath        = "hooks.hooks_builtin"
	violationQuery  = "data.hooks.violation[result]"

	hookRego = `package hooks

violation[response] {
  key := input.constraints[_]
  inp := {
    "review": input.review,
    "parameters": data.constraints[key.kind][key.name],
  }
  data.template.violation[r] with input as inp
  response := {
    "key": key,
    "details": object.get(r, "details", {}),
    "msg": r.msg,
  }
}
`
)

var hookModule = ast.MustParseModuleWithOpts(hookRego, ast.ParserOptions{RegoVersion: ast.RegoV0})

// ErrUnsupported is what Dump answers: nothing in this process dumps its
// policies (gator and Gatekeeper's debug endpoints use the frameworks' driver).
var ErrUnsupported = errors.New("preparedrego: not supported")

// Driver holds each template's prepared query per target, and per target a
// store of constraint parameters and synced data (data.inventory). Safe
// for concurrent use.
type Driver struct {
	externs []string

	mu      sync.RWMutex
	stores  map[string]storage.Store                     // by target
	queries map[string]map[string]rego.PreparedEvalQuery // by target, then constraint kind
	targets map[string][]string                          // a constraint kind's targets
}

// New returns a driver whose templates may reference data.inventory, as
// Gatekeeper's (rego.Externs("inventory")).
func New() *Driver {
	return &Driver{
		externs: []string{"data.inventory"},
		stores:  map[string]storage.Store{},
		queries: map[string]map[string]rego.PreparedEvalQuery{},
		targets: map[string][]string{},
	}
}

var _ drivers.Driver = (*Driver)(nil)

// Name is the engine a template's code names: templates in Rego are this
// driver's.
func (d *Driver) Name() string { return schema.Name }

// AddTemplate compiles and prepares the template's query for each of its
// targets, replacing an earlier version.
func (d *Driver) AddTemplate(ctx context.Context, templ *templates.ConstraintTemplate) error {
	kind := templ.Spec.CRD.Spec.Names.Kind
	prepared := map[string]rego.PreparedEvalQuery{}
	var targets []string
	for i := range templ.Spec.Targets {
		target := &templ.Spec.Targets[i]
		store, err := d.store(ctx, target.Target)
		if err != nil {
			return err
		}
		modules, err := d.parse(target)
		if err != nil {
			return err
		}
		compiler := ast.NewCompiler().WithCapabilities(ast.CapabilitiesForThisVersion())
		compiler.Compile(modules)
		if compiler.Failed() {
			return fmt.Errorf("%w: template %s: %w", clienterrors.ErrCompile, templ.Name, compiler.Errors)
		}
		pq, err := rego.New(rego.Compiler(compiler), rego.Store(store), rego.Query(violationQuery),
			rego.SetRegoVersion(ast.RegoV0)).PrepareForEval(ctx)
		if err != nil {
			return fmt.Errorf("preparing template %s: %w", templ.Name, err)
		}
		prepared[target.Target] = pq
		targets = append(targets, target.Target)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, byKind := range d.queries {
		delete(byKind, kind)
	}
	for target, pq := range prepared {
		if d.queries[target] == nil {
			d.queries[target] = map[string]rego.PreparedEvalQuery{}
		}
		d.queries[target][kind] = pq
	}
	d.targets[kind] = targets
	return nil
}

// parse is the template's Rego for one target as the frameworks' driver
// rewrites it: the entry point under data.template, each library under
// data.libs["lib_<i>"], references to data.lib rewritten to them; plus the
// hook module.
func (d *Driver) parse(target *templates.Target) (map[string]*ast.Module, error) {
	var code *templates.Code
	for i := range target.Code {
		if target.Code[i].Engine == schema.Name {
			code = &target.Code[i]
			break
		}
	}
	if code == nil {
		return nil, fmt.Errorf("target %s: no Rego code", target.Target)
	}
	src, err := schema.GetSource(*code)
	if err != nil {
		return nil, err
	}
	version := ast.RegoV0
	if src.Version == "v1" {
		version = ast.RegoV1
	}
	entry, err := parseModule(templatePackage, version, src.Rego)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", clienterrors.ErrInvalidConstraintTemplate, err)
	}
	entry.Package.Path = ast.Ref{ast.DefaultRootDocument, ast.StringTerm(templatePackage)}
	if !hasRule(entry, "violation") {
		return nil, fmt.Errorf("%w: missing required rule violation", clienterrors.ErrInvalidConstraintTemplate)
	}
	rr, err := regorewriter.New(regorewriter.NewPackagePrefixer(libPrefix), []string{libRoot}, d.externs)
	if err != nil {
		return nil, err
	}
	rr.AddEntryPointModule(templatePackage, entry)
	for i, lib := range src.Libs {
		path := fmt.Sprintf(`%s["lib_%d"]`, libPrefix, i)
		m, err := parseModule(path, version, lib)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", clienterrors.ErrInvalidConstraintTemplate, err)
		}
		if err := rr.AddLib(path, m); err != nil {
			return nil, fmt.Errorf("%w: %w", clienterrors.ErrInvalidConstraintTemplate, err)
		}
	}
	sources, err := rr.Rewrite()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", clienterrors.ErrInvalidConstraintTemplate, err)
	}
	modules := map[string]*ast.Module{hookPath: hookModule}
	for i, m := range append(sources.EntryPoints, sources.Libs...) {
		modules[fmt.Sprintf("%s%d", templatePackage, i)] = m.Module
	}
	return modules, nil
}

func parseModule(path string, version ast.RegoVersion, src string) (*ast.Module, error) {
	m, err := ast.ParseModuleWithOpts(path, src, ast.ParserOptions{RegoVersion: version})
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("module %s is empty", path)
	}
	return m, nil
}

func hasRule(m *ast.Module, name string) bool {
	for _, r := range m.Rules {
		if string(r.Head.Name) == name {
			return true
		}
	}
	return false
}

// RemoveTemplate drops the template's queries and its constraints'
// parameters.
func (d *Driver) RemoveTemplate(ctx context.Context, templ *templates.ConstraintTemplate) error {
	kind := templ.Spec.CRD.Spec.Names.Kind
	d.mu.Lock()
	defer d.mu.Unlock()
	for target, byKind := range d.queries {
		delete(byKind, kind)
		if err := d.remove(ctx, target, storage.Path{"constraints", kind}); err != nil {
			return err
		}
	}
	delete(d.targets, kind)
	return nil
}

// AddConstraint stores the constraint's spec.parameters ({} when it has
// none) where the hook module reads them.
func (d *Driver) AddConstraint(ctx context.Context, constraint *unstructured.Unstructured) error {
	params, _, err := unstructured.NestedFieldNoCopy(constraint.Object, "spec", "parameters")
	if err != nil {
		return fmt.Errorf("%w: %w", constraints.ErrInvalidConstraint, err)
	}
	if params == nil {
		params = map[string]any{}
	}
	key := drivers.ConstraintKeyFrom(constraint)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, target := range d.targets[key.Kind] {
		if err := d.write(ctx, target, key.StoragePath(), params); err != nil {
			return err
		}
	}
	return nil
}

// RemoveConstraint drops the constraint's parameters.
func (d *Driver) RemoveConstraint(ctx context.Context, constraint *unstructured.Unstructured) error {
	path := drivers.ConstraintKeyFrom(constraint).StoragePath()
	d.mu.Lock()
	defer d.mu.Unlock()
	for target := range d.stores {
		if err := d.remove(ctx, target, path); err != nil {
			return err
		}
	}
	return nil
}

// AddData stores data at data.inventory.<path>, as Gatekeeper's sync does.
func (d *Driver) AddData(ctx context.Context, target string, path storage.Path, data any) error {
	if _, err := d.store(ctx, target); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.write(ctx, target, append(storage.Path{"inventory"}, path...), data)
}

// RemoveData drops data.inventory.<path>.
func (d *Driver) RemoveData(ctx context.Context, target string, path storage.Path) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.remove(ctx, target, append(storage.Path{"inventory"}, path...))
}

// Query evaluates the constraints against review with their templates'
// prepared queries: one evaluation per constraint kind, as the frameworks'
// driver does. An evaluation that fails is a result per constraint carrying
// the error (fail closed), as there.
func (d *Driver) Query(ctx context.Context, target string, cs []*unstructured.Unstructured, review any, opts ...reviews.ReviewOpt) (*drivers.QueryResponse, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	cfg := &reviews.ReviewCfg{}
	for _, opt := range opts {
		opt(cfg)
	}
	// The review as the template reads it: its JSON form (Gatekeeper's
	// review is an admission request with unexported extras), plus the
	// namespace Gatekeeper attaches.
	reviewJSON, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	reviewMap := map[string]any{}
	if err := json.Unmarshal(reviewJSON, &reviewMap); err != nil {
		return nil, err
	}
	reviewMap["namespaceObject"] = cfg.Namespace

	byKind := map[string][]*unstructured.Unstructured{}
	for _, c := range cs {
		byKind[c.GetKind()] = append(byKind[c.GetKind()], c)
	}
	keys := drivers.KeyMap(cs)
	var results []*types.Result
	d.mu.RLock()
	defer d.mu.RUnlock()
	for kind, kindConstraints := range byKind {
		pq, ok := d.queries[target][kind]
		if !ok {
			return nil, fmt.Errorf("missing Template %q for target %q", kind, target)
		}
		constraintKeys := make([]any, 0, len(kindConstraints))
		for _, c := range kindConstraints {
			constraintKeys = append(constraintKeys, map[string]any{"kind": c.GetKind(), "name": c.GetName()})
		}
		input, err := ast.InterfaceToValue(map[string]any{"target": target, "constraints": constraintKeys, "review": reviewMap})
		if err != nil {
			return nil, err
		}
		rs, err := pq.Eval(ctx, rego.EvalParsedInput(input))
		if err != nil {
			rs = make(rego.ResultSet, 0, len(kindConstraints))
			for _, c := range kindConstraints {
				rs = append(rs, rego.Result{Bindings: map[string]any{"result": map[string]any{
					"msg": err.Error(),
					"key": map[string]any{"kind": c.GetKind(), "name": c.GetName()},
				}}})
			}
		}
		kindResults, err := drivers.ToResults(keys, rs)
		if err != nil {
			return nil, err
		}
		results = append(results, kindResults...)
	}
	return &drivers.QueryResponse{Results: results}, nil
}

// Dump is not supported.
func (d *Driver) Dump(context.Context) (string, error) { return "", ErrUnsupported }

// GetDescriptionForStat knows no stats: this driver gathers none.
func (d *Driver) GetDescriptionForStat(name string) (string, error) {
	return "", fmt.Errorf("%w: stat %q", ErrUnsupported, name)
}

// store returns the target's store, made with an empty data.inventory on
// first use.
func (d *Driver) store(ctx context.Context, target string) (storage.Store, error) {
	d.mu.RLock()
	s, ok := d.stores[target]
	d.mu.RUnlock()
	if ok {
		return s, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.stores[target]; ok {
		return s, nil
	}
	s = inmem.NewWithOpts(inmem.OptRoundTripOnWrite(false))
	if err := storage.Txn(ctx, s, storage.WriteParams, func(txn storage.Transaction) error {
		return storage.MakeDir(ctx, s, txn, storage.Path{"inventory"})
	}); err != nil {
		return nil, err
	}
	d.stores[target] = s
	return s, nil
}

// write puts data at path in the target's store, making its parents.
// d.mu is held.
func (d *Driver) write(ctx context.Context, target string, path storage.Path, data any) error {
	s, ok := d.stores[target]
	if !ok {
		return fmt.Errorf("no store for target %q", target)
	}
	return storage.Txn(ctx, s, storage.WriteParams, func(txn storage.Transaction) error {
		if err := storage.MakeDir(ctx, s, txn, path[:len(path)-1]); err != nil {
			return err
		}
		return s.Write(ctx, txn, storage.AddOp, path, data)
	})
}

// remove deletes path from the target's store; a missing path is no error.
// d.mu is held.
func (d *Driver) remove(ctx context.Context, target string, path storage.Path) error {
	s, ok := d.stores[target]
	if !ok {
		return nil
	}
	return storage.Txn(ctx, s, storage.WriteParams, func(txn storage.Transaction) error {
		if err := s.Write(ctx, txn, storage.RemoveOp, path, nil); err != nil && !storage.IsNotFound(err) {
			return err
		}
		return nil
	})
}
