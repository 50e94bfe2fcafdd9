package celpolicy

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiservercel "k8s.io/apiserver/pkg/cel"

	"github.com/quotakeeper/quotakeeper/internal/quantities"
)

// compiler compiles one policy's expressions in its environment and
// collects what is wrong with them, field by field.
type compiler struct {
	env  *env
	errs field.ErrorList
}

// condition is a compiled trigger condition.
type condition struct {
	path *field.Path
	src  string
	prog *program
}

// condition compiles a condition: it must type-check to bool, as
// Kubernetes requires of validation expressions (a field of the trigger is
// dyn: compare it, trigger.spec.enabled == true).
func (c *compiler) condition(path *field.Path, src string) condition {
	p, err := c.env.compile(src)
	if err != nil {
		c.errs = append(c.errs, field.Invalid(path, src, "compilation failed: "+err.Error()))
		return condition{}
	}
	if !p.out.IsExactType(cel.BoolType) {
		c.errs = append(c.errs, field.Invalid(path, src, "must evaluate to bool but got "+p.out.String()))
		return condition{}
	}
	return condition{path: path, src: src, prog: p}
}

// holds evaluates the condition.
func (k condition) holds(ctx context.Context, vars interpreter.Activation) (bool, error) {
	val, err := k.prog.eval(ctx, vars)
	if err != nil {
		return false, field.Invalid(k.path, k.src, "evaluation failed: "+err.Error())
	}
	return val == types.True, nil
}

// stringExpr is a compiled expression that returns a string, such as a
// parent's nameExpression or a template segment.
type stringExpr struct {
	prog *program
	// written is how the policy wrote it, for error messages.
	written string
}

// stringExpr compiles src, which must return a string: its type must be
// string, or dyn (a field of the trigger), which is checked when evaluated.
// It returns the message of what is wrong, or "".
func (c *compiler) stringExpr(src, written string) (stringExpr, string) {
	p, err := c.env.compile(src)
	if err != nil {
		return stringExpr{}, "compilation failed" + in(written, src) + ": " + err.Error()
	}
	if !p.out.IsExactType(cel.StringType) && !p.out.IsExactType(cel.DynType) {
		return stringExpr{}, written + " must evaluate to string but got " + p.out.String()
	}
	return stringExpr{prog: p, written: written}, ""
}

func (s stringExpr) eval(ctx context.Context, vars interpreter.Activation) (string, string) {
	val, err := s.prog.eval(ctx, vars)
	if err != nil {
		return "", "evaluation of " + s.written + " failed: " + err.Error()
	}
	str, ok := val.(types.String)
	if !ok {
		return "", fmt.Sprintf("%s must evaluate to string but got %s", s.written, val.Type().TypeName())
	}
	return string(str), ""
}

// in names a template segment in a message, when the expression is one.
func in(written, src string) string {
	if written == src {
		return ""
	}
	return " in " + written
}

// checkFunc says what is wrong with a value a field renders to, as
// apimachinery's validation functions do.
type checkFunc func(string) []string

// text is a string field that may hold {{ expr }} templates.
type text struct {
	path  *field.Path
	raw   string
	parts []part
	check checkFunc
}

// part is literal text, or an expression when expr.prog is set.
type part struct {
	lit  string
	expr stringExpr
}

// text compiles a string field. A literal is checked now, a template when
// rendered; check may be nil.
func (c *compiler) text(path *field.Path, raw string, check checkFunc) text {
	t := text{path: path, raw: raw, check: check}
	if !IsTemplate(raw) {
		if err := t.checked(raw); err != nil {
			c.errs = append(c.errs, err)
		}
		return t
	}
	segs, err := splitTemplate(raw)
	if err != nil {
		c.errs = append(c.errs, field.Invalid(path, raw, err.Error()))
		return t
	}
	for _, s := range segs {
		if !s.expr {
			t.parts = append(t.parts, part{lit: s.text})
			continue
		}
		e, msg := c.stringExpr(s.text, s.written)
		if msg != "" {
			c.errs = append(c.errs, field.Invalid(path, raw, msg))
			continue
		}
		t.parts = append(t.parts, part{expr: e})
	}
	return t
}

// render returns the field's value.
func (t text) render(ctx context.Context, vars interpreter.Activation) (string, error) {
	if t.parts == nil {
		return t.raw, nil
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.expr.prog == nil {
			b.WriteString(p.lit)
			continue
		}
		s, msg := p.expr.eval(ctx, vars)
		if msg != "" {
			return "", field.Invalid(t.path, t.raw, msg)
		}
		b.WriteString(s)
	}
	out := b.String()
	if err := t.checked(out); err != nil {
		return "", err
	}
	return out, nil
}

// checked applies the field's check to a value it holds or rendered.
func (t text) checked(v string) *field.Error {
	if t.check == nil {
		return nil
	}
	if msgs := t.check(v); len(msgs) > 0 {
		if v == "" {
			return field.Required(t.path, strings.Join(msgs, "; "))
		}
		return field.Invalid(t.path, v, strings.Join(msgs, "; "))
	}
	return nil
}

// keyedText is one templated value of a map field, such as a label.
type keyedText struct {
	key   string
	value text
}

// textMap compiles a map whose keys are literal and checked now by
// checkKey, and whose values may be templates checked by checkValue.
func (c *compiler) textMap(path *field.Path, m map[string]string, checkKey, checkValue checkFunc) []keyedText {
	var out []keyedText
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kpath := path.Key(k)
		if msgs := checkKey(k); len(msgs) > 0 {
			c.errs = append(c.errs, field.Invalid(kpath, k, strings.Join(msgs, "; ")))
			continue
		}
		out = append(out, keyedText{key: k, value: c.text(kpath, m[k], checkValue)})
	}
	return out
}

func renderMap(ctx context.Context, vars interpreter.Activation, kvs []keyedText) (map[string]string, error) {
	if kvs == nil {
		return nil, nil
	}
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v, err := kv.value.render(ctx, vars)
		if err != nil {
			return nil, err
		}
		out[kv.key] = v
	}
	return out, nil
}

// amount is an int-or-string amount: fixed, or one expression.
type amount struct {
	path  *field.Path
	raw   intstr.IntOrString
	fixed int64
	prog  *program
	min   int64
}

// Types an amount expression may have: int (or uint), a quantity string, a
// quantity, or dyn (checked when evaluated).
var amountTypes = []*cel.Type{cel.IntType, cel.UintType, cel.StringType, apiservercel.QuantityType, cel.DynType}

// amount compiles an amount of at least min.
func (c *compiler) amount(path *field.Path, raw intstr.IntOrString, min int64) amount {
	a := amount{path: path, raw: raw, min: min}
	var msg string
	switch {
	case raw.Type == intstr.Int:
		a.fixed, msg = a.within(int64(raw.IntVal))
	case !IsTemplate(raw.StrVal):
		a.fixed, msg = a.parse(raw.StrVal)
	default:
		msg = a.compileExpr(c.env)
	}
	if msg != "" {
		c.errs = append(c.errs, field.Invalid(path, raw.String(), msg))
	}
	return a
}

func (a *amount) compileExpr(e *env) string {
	segs, err := splitTemplate(strings.TrimSpace(a.raw.StrVal))
	if err != nil {
		return err.Error()
	}
	if len(segs) != 1 || !segs[0].expr {
		return "an amount template is a single {{ expr }} and nothing else"
	}
	p, err := e.compile(segs[0].text)
	if err != nil {
		return "compilation failed" + in(segs[0].written, segs[0].text) + ": " + err.Error()
	}
	if !slices.ContainsFunc(amountTypes, p.out.IsExactType) {
		return fmt.Sprintf("%s must evaluate to int, string or %s but got %s", segs[0].written, apiservercel.QuantityType, p.out)
	}
	a.prog = p
	return ""
}

// render returns the amount.
func (a amount) render(ctx context.Context, vars interpreter.Activation) (int64, error) {
	if a.prog == nil {
		return a.fixed, nil
	}
	val, err := a.prog.eval(ctx, vars)
	if err != nil {
		return 0, field.Invalid(a.path, a.raw.StrVal, "evaluation failed: "+err.Error())
	}
	n, msg := a.value(val)
	if msg != "" {
		return 0, field.Invalid(a.path, a.raw.StrVal, msg)
	}
	return n, nil
}

// value converts what an amount expression returned.
func (a amount) value(val ref.Val) (int64, string) {
	switch v := val.(type) {
	case types.Int:
		return a.within(int64(v))
	case types.Uint:
		if uint64(v) > math.MaxInt64 {
			return 0, fmt.Sprintf("evaluated to %d, past the int64 maximum", uint64(v))
		}
		return a.within(int64(v))
	case types.Double:
		// JSON numbers decode as doubles; a whole one is an integer.
		if f := float64(v); f == math.Trunc(f) && math.Abs(f) < math.MaxInt64 {
			return a.within(int64(f))
		}
		return 0, fmt.Sprintf("evaluated to %v, not a whole number", float64(v))
	case types.String:
		return a.parse(string(v))
	case apiservercel.Quantity:
		return a.quantity(v.Quantity)
	}
	return 0, "must evaluate to int, string or " + apiservercel.QuantityType.String() + " but got " + val.Type().TypeName()
}

// parse reads a quantity string such as "10Gi" or "50".
func (a amount) parse(s string) (int64, string) {
	q, err := quantities.Parse(s)
	if err != nil {
		return 0, fmt.Sprintf("%q is not an integer or a quantity such as 10Gi", s)
	}
	return a.quantity(&q)
}

func (a amount) quantity(q *resource.Quantity) (int64, string) {
	n, ok := q.AsInt64()
	if !ok {
		return 0, fmt.Sprintf("%s is not a whole number of base units within int64", q)
	}
	return a.within(n)
}

func (a amount) within(n int64) (int64, string) {
	if n < a.min {
		return 0, fmt.Sprintf("must be greater than or equal to %d, got %d", a.min, n)
	}
	return n, ""
}
