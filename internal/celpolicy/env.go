package celpolicy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/lru"
)

// CostLimit bounds the cost of one evaluation of one expression, in the
// units Kubernetes uses for CEL in admission (celconfig.PerCallLimit, about
// a tenth of a second): a condition or template cannot stall a controller
// or an admission request.
const CostLimit = celconfig.PerCallLimit

// Variable names. GrantCreationPolicy also names the trigger object, as
// seed 002 and Milo's GrantCreationPolicy conditions do.
const (
	varTrigger     = "trigger"
	varObject      = "object"
	varUser        = "user"
	varRequestInfo = "requestInfo"
)

// env is one CEL environment: the Kubernetes base environment (its
// libraries: lists, regex, URLs, quantity, IP, CIDR, semver, format,
// strings, sets) with a policy kind's variables. Each variable is a JSON
// object (map(string, dyn)): its fields are checked when evaluated.
type env struct {
	name string
	cel  *cel.Env
}

var (
	grantEnv = newEnv("grant", varTrigger, varObject)
	claimEnv = newEnv("claim", varTrigger, varUser, varRequestInfo)
)

func newEnv(name string, vars ...string) *env {
	opts := make([]cel.EnvOption, 0, len(vars))
	for _, v := range vars {
		opts = append(opts, cel.Variable(v, cel.MapType(cel.StringType, cel.DynType)))
	}
	set, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        opts,
	})
	if err != nil {
		panic(fmt.Sprintf("celpolicy: %s environment: %v", name, err))
	}
	return &env{name: name, cel: set.NewExpressionsEnv()}
}

// program is a compiled, type-checked expression.
type program struct {
	prog cel.Program
	// out is the type the checker inferred; dyn when it depends on the
	// input.
	out *cel.Type
}

// programs caches compiled programs by environment and expression: the
// same policies are compiled by the webhook, the status controller and on
// every change of a policy. Bounded, so that a stream of distinct
// expressions cannot grow it without end.
var programs = lru.New(4096)

// compile returns the program of src in e, from the cache when it has it.
// The error is CEL's issues, one line each.
func (e *env) compile(src string) (*program, error) {
	key := e.name + "\x00" + src
	if p, ok := programs.Get(key); ok {
		return p.(*program), nil
	}
	ast, iss := e.cel.Compile(src)
	if iss.Err() != nil {
		return nil, errors.New(issuesMessage(iss))
	}
	prog, err := e.cel.Program(ast, cel.CostLimit(CostLimit))
	if err != nil {
		return nil, err
	}
	p := &program{prog: prog, out: ast.OutputType()}
	programs.Add(key, p)
	return p, nil
}

// issuesMessage renders CEL issues as "line:column: message", joined by
// "; ", without the source excerpt CEL adds: the field path and value say
// where.
func issuesMessage(iss *cel.Issues) string {
	var msgs []string
	for _, e := range iss.Errors() {
		msgs = append(msgs, fmt.Sprintf("%d:%d: %s", e.Location.Line(), e.Location.Column()+1, e.Message))
	}
	return strings.Join(msgs, "; ")
}

// errCostLimit is returned when an evaluation exceeds CostLimit.
var errCostLimit = fmt.Errorf("evaluation exceeded the cost limit of %d", CostLimit)

// eval evaluates p against vars.
func (p *program) eval(ctx context.Context, vars interpreter.Activation) (ref.Val, error) {
	val, _, err := p.prog.ContextEval(ctx, vars)
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
			return nil, errCostLimit
		}
		return nil, err
	}
	return val, nil
}
