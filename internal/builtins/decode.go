package builtins

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
)

// decoder turns a builtin argument into Go values, collecting every problem
// with the field path it was found at ("claim.requests[0].amount: ..."), so a
// policy author can fix all of them from one message. Field names are
// checked: a misspelt optional field would otherwise be silently ignored and
// change what is counted.
type decoder struct {
	errs []string
}

func (d *decoder) fail(path, format string, args ...any) {
	d.errs = append(d.errs, path+": "+fmt.Sprintf(format, args...))
}

// err returns the collected problems as a halt error, or nil.
func (d *decoder) err() error {
	if len(d.errs) == 0 {
		return nil
	}
	return rego.NewHaltError(errors.New(strings.Join(d.errs, "; ")))
}

// toJSON converts a Rego value to encoding/json shapes; numbers stay
// json.Number so that no amount passes through a float64.
func toJSON(path string, t *ast.Term) (any, error) {
	v, err := ast.JSON(t.Value)
	if err != nil {
		return nil, rego.NewHaltError(fmt.Errorf("%s: %w", path, err))
	}
	return v, nil
}

// object checks that v is an object with only the allowed keys. It returns
// nil (after recording the problem) when v is not an object.
func (d *decoder) object(path string, v any, allowed ...string) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		d.fail(path, "must be an object, got %s", typeName(v))
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(allowed, k) {
			d.fail(path+"."+k, "unknown field (allowed: %s)", strings.Join(allowed, ", "))
		}
	}
	return m
}

// required reports a missing key and returns whether it is present.
func (d *decoder) required(path string, m map[string]any, key string) bool {
	if _, ok := m[key]; !ok {
		d.fail(path+"."+key, "required")
		return false
	}
	return true
}

// requiredString returns m[key] as a non-empty string, reporting it when
// absent or empty.
func (d *decoder) requiredString(path string, m map[string]any, key string) string {
	if !d.required(path, m, key) {
		return ""
	}
	s := d.str(path, m, key)
	if _, isString := m[key].(string); isString && s == "" {
		d.fail(path+"."+key, "must not be empty")
	}
	return s
}

// str returns m[key] as a string; absent is "".
func (d *decoder) str(path string, m map[string]any, key string) string {
	v, ok := m[key]
	if !ok {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		d.fail(path+"."+key, "must be a string, got %s", typeName(v))
	}
	return s
}

// int64 returns m[key] as an int64. A whole number written in any notation
// (1000, 1e3, 1000.0) is accepted; a fraction or a value outside int64 is an
// error, never rounded or clamped.
func (d *decoder) int64(path string, m map[string]any, key string) int64 {
	v := m[key]
	n, ok := v.(json.Number)
	if !ok {
		d.fail(path+"."+key, "must be a number, got %s", typeName(v))
		return 0
	}
	i, err := wholeNumber(n)
	if err != nil {
		d.fail(path+"."+key, "%v", err)
	}
	return i
}

func wholeNumber(n json.Number) (int64, error) {
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return 0, fmt.Errorf("not a number: %s", n)
	}
	if !r.IsInt() {
		return 0, fmt.Errorf("must be a whole number, got %s", n)
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("overflows int64, got %s", n)
	}
	return r.Num().Int64(), nil
}

// stringMap returns m[key] as a map of strings; absent is nil.
func (d *decoder) stringMap(path string, m map[string]any, key string) map[string]string {
	v, ok := m[key]
	if !ok {
		return nil
	}
	path += "." + key
	obj, ok := v.(map[string]any)
	if !ok {
		d.fail(path, "must be an object of strings, got %s", typeName(v))
		return nil
	}
	out := make(map[string]string, len(obj))
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		s, ok := obj[k].(string)
		if !ok {
			d.fail(fmt.Sprintf("%s[%s]", path, k), "must be a string, got %s", typeName(obj[k]))
			continue
		}
		out[k] = s
	}
	return out
}

// labels returns m[key] as a map of label-syntax keys and values; absent is nil.
func (d *decoder) labels(path string, m map[string]any, key string) map[string]string {
	out := d.stringMap(path, m, key)
	for _, k := range slices.Sorted(maps.Keys(out)) {
		field := fmt.Sprintf("%s.%s[%s]", path, key, k)
		// Checked here too so the error carries the argument's path.
		if msg := ledger.DimensionKeyError(k); msg != "" {
			d.fail(field, "invalid key: %s", msg)
		}
		if msg := ledger.DimensionValueError(out[k]); msg != "" {
			d.fail(field, "invalid value %q: %s", out[k], msg)
		}
	}
	return out
}

func (d *decoder) consumer(path string, m map[string]any) ledger.Consumer {
	if !d.required(path, m, "consumer") {
		return ledger.Consumer{}
	}
	path += ".consumer"
	c := d.object(path, m["consumer"], "apiGroup", "kind", "name", "namespace")
	if c == nil {
		return ledger.Consumer{}
	}
	return ledger.Consumer{
		APIGroup:  d.str(path, c, "apiGroup"),
		Kind:      d.requiredString(path, c, "kind"),
		Name:      d.requiredString(path, c, "name"),
		Namespace: d.str(path, c, "namespace"),
	}
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// validationHalt reports a ledger validation error with paths rooted at the
// builtin's argument, like the decoder's own errors.
func validationHalt(root string, err error) error {
	var verr *ledger.ValidationError
	if !errors.As(err, &verr) {
		return nil
	}
	msgs := make([]string, len(verr.Errors))
	for i, fe := range verr.Errors {
		msgs[i] = root + "." + fe.Error()
	}
	return rego.NewHaltError(errors.New(strings.Join(msgs, "; ")))
}

// invalidInputHalts counts the halt of a builtin whose only failure is
// input it cannot read (package metrics), outside an observation, and
// passes the result on: quota.quantity, quota.display,
// quota.pod_resources and quota.selects answer through it.
func invalidInputHalts(bctx rego.BuiltinContext, name string) func(*ast.Term, error) (*ast.Term, error) {
	return func(t *ast.Term, err error) (*ast.Term, error) {
		if err != nil && recorderFrom(bctx) == nil {
			metrics.Halted(name, metrics.CauseInvalidInput, false)
		}
		return t, err
	}
}
