package suite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/verify"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/quotakeeper/quotakeeper/cmd/quotactl/internal/quotafile"
	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/counting"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/validation"
)

// Runner runs suites. Reviews go through gator's verify.Runner, over a file
// system that also serves the AdmissionReviews this package writes for
// Admission blocks. The quota builtins must be registered (builtins.Register)
// before the first run; each case's reviews carry the case's own Env (its
// ledger, policies and units: builtins.WithEnv), so runs may overlap.
type Runner struct {
	files *overlay
	gator *verify.Runner
}

// NewRunner returns a Runner reading suites and the files they name from fsys.
func NewRunner(fsys fs.FS, includeTrace bool) (*Runner, error) {
	files := newOverlay(fsys)
	g, err := verify.NewRunner(files, func(opts ...gator.Opt) (gator.Client, error) {
		return gator.NewOPAClient(includeTrace, opts...)
	}, verify.IncludeTrace(includeTrace))
	if err != nil {
		return nil, err
	}
	return &Runner{files: files, gator: g}, nil
}

// Run runs every test of s that filter selects; results use gator's types so
// that gator's printer reports them.
func (r *Runner) Run(ctx context.Context, filter verify.Filter, s *Suite) verify.SuiteResult {
	if s.Skip {
		return verify.SuiteResult{Path: s.input, Skipped: true}
	}
	start := time.Now()
	res := verify.SuiteResult{Path: s.input}
	for i := range s.Tests {
		t := &s.Tests[i]
		if t.Skip || !filter.MatchesTest(gatorTest(t)) {
			res.TestResults = append(res.TestResults, verify.TestResult{Name: t.Name, Skipped: true})
			continue
		}
		res.TestResults = append(res.TestResults, r.runTest(ctx, filter, s, t))
	}
	res.Runtime = verify.Duration(time.Since(start))
	return res
}

// gatorTest is what gator's filters look at: the names.
func gatorTest(t *Test) *verify.Test {
	g := &verify.Test{Name: t.Name}
	for _, c := range t.Cases {
		g.Cases = append(g.Cases, &verify.Case{Name: c.Name})
	}
	return g
}

func (r *Runner) runTest(ctx context.Context, filter verify.Filter, s *Suite, t *Test) verify.TestResult {
	start := time.Now()
	if t.Invalid || len(t.Cases) == 0 {
		// Nothing quota-specific: gator checks the constraint against the template.
		res := r.gatorRun(ctx, s, t, nil)
		res.Runtime = verify.Duration(time.Since(start))
		return res
	}
	res := verify.TestResult{Name: t.Name}
	if err := r.checkConstraint(s, t); err != nil {
		res.Error, res.Runtime = err, verify.Duration(time.Since(start))
		return res
	}
	for i := range t.Cases {
		c := &t.Cases[i]
		if c.Skip || !filter.MatchesCase(t.Name, c.Name) {
			res.CaseResults = append(res.CaseResults, verify.CaseResult{Name: c.Name, Skipped: true})
			continue
		}
		cr, err := r.runCase(ctx, s, t, c)
		if err != nil && cr.Error == nil {
			// The template or the constraint failed: the whole test fails, as in gator.
			res.Error = err
			break
		}
		res.CaseResults = append(res.CaseResults, cr)
	}
	res.Runtime = verify.Duration(time.Since(start))
	return res
}

// checkConstraint judges the test's constraint as the manager's webhook
// would (package validation), so a sample the cluster would refuse fails
// its suite too.
func (r *Runner) checkConstraint(s *Suite, t *Test) error {
	c, err := r.readObject(path.Join(path.Dir(s.path), t.Constraint))
	if err != nil {
		return err
	}
	if !slices.Contains(validation.QuotaConstraintKinds, c.GetKind()) {
		return nil
	}
	if errs := validation.ValidateQuotaConstraint(c); len(errs) > 0 {
		return fmt.Errorf("constraint %s: the manager's webhook would refuse it: %w", t.Constraint, errs.ToAggregate())
	}
	return nil
}

// runCase reviews the case's object, or each of its steps, against a fresh
// ledger. A non-nil error with a nil CaseResult.Error is a test-level
// failure (template or constraint).
func (r *Runner) runCase(ctx context.Context, s *Suite, t *Test, c *Case) (res verify.CaseResult, _ error) {
	start := time.Now()
	res.Name = c.Name
	defer func() { res.Runtime = verify.Duration(time.Since(start)) }()

	cl, err := r.caseCluster(s, t, c)
	if err != nil {
		res.Error = fmt.Errorf("quota: %w", err)
		return res, nil
	}
	ctx = builtins.WithEnv(ctx, cl.env(cl.ledger))

	steps := c.Steps
	if len(steps) == 0 {
		steps = []Step{{Object: c.Object, Admission: c.Admission, Assertions: c.Assertions, Usage: c.Usage}}
	} else if len(c.Usage) > 0 {
		last := steps[len(steps)-1]
		last.Usage = append(append([]Usage(nil), last.Usage...), c.Usage...)
		steps = append(steps[:len(steps)-1:len(steps)-1], last)
	}
	var prints []string
	for i, st := range steps {
		object, err := r.stepObject(s, st)
		var cr verify.CaseResult
		var testErr error // the template or constraint failed
		if err != nil {
			cr.Error = err
		} else {
			cr, testErr = r.review(ctx, s, t, fmt.Sprintf("%s#%d", c.Name, i+1), object, c, st, st.Assertions)
		}
		res.Trace = cr.Trace
		if cr.Print != "" {
			prints = append(prints, cr.Print)
		}
		res.Print = strings.Join(prints, "")
		if testErr != nil {
			return res, testErr
		}
		err = cr.Error
		if err == nil {
			err = r.observe(ctx, s, t, c, st, object, cl)
		}
		if err == nil {
			err = checkUsage(ctx, cl.ledger, st.Usage)
		}
		if err != nil {
			if len(c.Steps) > 0 {
				err = fmt.Errorf("step %d%s: %w", i+1, stepName(st), err)
			}
			res.Error = err
			return res, nil
		}
	}
	return res, nil
}

func stepName(st Step) string {
	if st.Name != "" {
		return " (" + st.Name + ")"
	}
	return " (" + st.Object + ")"
}

// caseCluster is a fresh ledger over the case's quota files, their
// ClaimCreationPolicies, and no objects.
func (r *Runner) caseCluster(s *Suite, t *Test, c *Case) (*cluster, error) {
	var set quotafile.Set
	dir := path.Dir(s.path)
	for _, f := range append(append([]string(nil), t.Quota...), c.Quota...) {
		if err := set.Read(r.files, path.Join(dir, f)); err != nil {
			return nil, err
		}
	}
	grants, err := set.GrantSet()
	if err != nil {
		return nil, err
	}
	store := ledger.NewMemoryStore()
	return &cluster{ledger: ledger.New(store, grants), store: store, policies: set.ClaimPolicies(), units: &set, objects: map[string]*unstructured.Unstructured{}, tally: counting.NewTally()}, nil
}

// stepObject is the file gator reviews for st: its object, or, with an
// Admission block, the AdmissionReview this package writes for it.
func (r *Runner) stepObject(s *Suite, st Step) (string, error) {
	if st.Admission == nil {
		return st.Object, nil
	}
	obj, err := r.readObject(path.Join(path.Dir(s.path), st.Object))
	if err != nil {
		return "", fmt.Errorf("object: %w", err)
	}
	if obj.GetKind() == "AdmissionReview" {
		return "", fmt.Errorf("object %s is already an AdmissionReview; drop admission or use a plain object", st.Object)
	}
	return r.admissionReview(s, st, obj)
}

// review has gator review object (a path relative to the suite) with the
// case's and the step's inventory, under the given assertions. A non-nil
// error is a test-level failure (template or constraint).
func (r *Runner) review(ctx context.Context, s *Suite, t *Test, name, object string, c *Case, st Step, assertions []verify.Assertion) (verify.CaseResult, error) {
	gc := &verify.Case{
		Name:       name,
		Object:     object,
		Inventory:  append(append([]string(nil), c.Inventory...), st.Inventory...),
		Assertions: assertions,
	}
	tr := r.gatorRun(ctx, s, t, []*verify.Case{gc})
	if tr.Error != nil {
		return verify.CaseResult{}, tr.Error
	}
	if len(tr.CaseResults) != 1 {
		return verify.CaseResult{}, fmt.Errorf("gator ran %d cases, want 1", len(tr.CaseResults))
	}
	return tr.CaseResults[0], nil
}

// gatorRun runs one gator Test made of t's template and constraint and the
// given cases.
func (r *Runner) gatorRun(ctx context.Context, s *Suite, t *Test, cases []*verify.Case) verify.TestResult {
	all, _ := verify.NewFilter("")
	gs := &verify.Suite{
		AbsolutePath: s.path,
		InputPath:    s.input,
		Tests: []verify.Test{{
			Name:       t.Name,
			Template:   t.Template,
			Constraint: t.Constraint,
			Expansion:  t.Expansion,
			Cases:      cases,
			Invalid:    t.Invalid,
		}},
	}
	sr := r.gator.Run(ctx, all, gs)
	if sr.Error != nil {
		return verify.TestResult{Name: t.Name, Error: sr.Error}
	}
	if len(sr.TestResults) != 1 {
		return verify.TestResult{Name: t.Name, Error: errors.New("gator returned no test result")}
	}
	return sr.TestResults[0]
}

func checkUsage(ctx context.Context, l *ledger.Ledger, want []Usage) error {
	var errs []error
	for _, u := range want {
		c := ledger.Consumer{APIGroup: u.Consumer.APIGroup, Kind: u.Consumer.Kind, Name: u.Consumer.Name, Namespace: u.Consumer.Namespace}
		key := ledger.NewBucketKey(c, u.ResourceType, u.Dimensions)
		got, err := l.Usage(ctx, key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var diffs []string
		for _, f := range []struct {
			name string
			want *int64
			got  int64
		}{
			{"limit", u.Limit, got.Limit},
			{"allocated", u.Allocated, got.Allocated},
			{"reserved", u.Reserved, got.Reserved},
			{"available", u.Available, got.Available},
		} {
			if f.want != nil && *f.want != f.got {
				diffs = append(diffs, fmt.Sprintf("%s %d, want %d", f.name, f.got, *f.want))
			}
		}
		if len(diffs) > 0 {
			errs = append(errs, fmt.Errorf("usage of %s: %s", key, strings.Join(diffs, ", ")))
		}
	}
	return errors.Join(errs...)
}
