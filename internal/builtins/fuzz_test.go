package builtins

import (
	"context"
	"errors"
	"maps"
	"math/big"
	"reflect"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// The fuzz targets feed the builtins what a policy could hand them: any Rego
// term, written as text. Seeds are in testdata/fuzz/<target>/; `make fuzz`
// runs each target (docs/operations.md).

// FuzzDecodeClaim checks quota.reserve's argument decoding: an accepted claim
// has everything the ledger needs except positive amounts (the ledger's own
// rule, reported through validationHalt with the argument's paths), and
// encoding it back to a Rego value decodes to the same claim.
func FuzzDecodeClaim(f *testing.F) {
	f.Fuzz(func(t *testing.T, arg string) {
		term, err := ast.ParseTerm(arg)
		if err != nil {
			return
		}
		c, _, _, err := decodeClaimTerm(term)
		if err != nil {
			requireHalt(t, err)
			return
		}
		if c.ID == "" {
			t.Fatalf("accepted a claim without an id: %#v", c)
		}
		for i, r := range c.Requests {
			checkConsumer(t, r.Consumer)
			if r.ResourceType == "" {
				t.Fatalf("requests[%d]: accepted an empty resourceType", i)
			}
			checkDimensions(t, r.Dimensions)
		}

		again, _, _, err := decodeClaimTerm(mustTerm(t, claimJSON(c)))
		if err != nil {
			t.Fatalf("re-decoding %#v: %v", c, err)
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip changed the claim:\n got %#v\nwant %#v", again, c)
		}

		// What the decoder accepts, the ledger judges on amounts alone.
		_, err = ledger.New(ledger.NewMemoryStore(), ledger.NewGrantSet()).Reserve(context.Background(), c)
		var verr *ledger.ValidationError
		switch {
		case err == nil:
			for i, r := range c.Requests {
				if r.Amount <= 0 {
					t.Fatalf("requests[%d]: ledger accepted amount %d", i, r.Amount)
				}
			}
		case errors.As(err, &verr):
			for _, fe := range verr.Errors {
				if !strings.HasSuffix(fe.Field, ".amount") && fe.Field != "requests" {
					t.Fatalf("ledger refused a decoded claim on %s: %v", fe.Field, err)
				}
			}
			if h := validationHalt("claim", err); h == nil || !strings.HasPrefix(h.Error(), "claim.") {
				t.Fatalf("validation error %v not reported with the argument's path: %v", err, h)
			}
		default:
			t.Fatalf("reserve: %v", err)
		}
	})
}

// FuzzDecodeQuery checks quota.usage's argument decoding: an accepted query
// names a valid consumer and dimensions, its bucket key keeps the
// dimensions, and encoding it back decodes to the same key.
func FuzzDecodeQuery(f *testing.F) {
	f.Fuzz(func(t *testing.T, arg string) {
		term, err := ast.ParseTerm(arg)
		if err != nil {
			return
		}
		key, err := decodeQueryTerm(term)
		if err != nil {
			requireHalt(t, err)
			return
		}
		checkConsumer(t, key.Consumer)
		if key.ResourceType == "" {
			t.Fatal("accepted an empty resourceType")
		}
		dims := key.DimensionSet()
		checkDimensions(t, dims)
		q := map[string]any{"consumer": consumerJSON(key.Consumer), "resourceType": key.ResourceType}
		if len(dims) > 0 {
			q["dimensions"] = dimensionsJSON(dims)
		}
		again, err := decodeQueryTerm(mustTerm(t, q))
		if err != nil {
			t.Fatalf("re-decoding %v: %v", q, err)
		}
		if again != key || again.Name() != key.Name() {
			t.Fatalf("round trip changed the key: got %#v, want %#v", again, key)
		}
	})
}

// FuzzQuantity checks quota.quantity(value, unit): the result n is the
// smallest whole number of units not below value (n*unit >= value >
// (n-1)*unit), never negative, and monotone in value.
func FuzzQuantity(f *testing.F) {
	f.Fuzz(func(t *testing.T, a, b, unit string) {
		na, okA := callQuantity(t, a, unit)
		nb, okB := callQuantity(t, b, unit)
		for _, c := range []struct {
			value string
			n     int64
			ok    bool
		}{{a, na, okA}, {b, nb, okB}} {
			if !c.ok {
				continue
			}
			if c.n < 0 {
				t.Fatalf("quantity(%q, %q) = %d, negative", c.value, unit, c.n)
			}
			v, u := rat(t, c.value), rat(t, "1"+unit)
			n := new(big.Rat).SetInt64(c.n)
			if new(big.Rat).Mul(n, u).Cmp(v) < 0 {
				t.Fatalf("quantity(%q, %q) = %d units, less than the value", c.value, unit, c.n)
			}
			if c.n > 0 && new(big.Rat).Mul(n.Sub(n, big.NewRat(1, 1)), u).Cmp(v) >= 0 {
				t.Fatalf("quantity(%q, %q) = %d is not rounded up to the next unit but past it", c.value, unit, c.n)
			}
		}
		if okA && okB {
			if cmp := rat(t, a).Cmp(rat(t, b)); cmp < 0 && na > nb || cmp > 0 && na < nb || cmp == 0 && na != nb {
				t.Fatalf("not monotone: quantity(%q)=%d, quantity(%q)=%d in %q", a, na, b, nb, unit)
			}
		}
	})
}

func callQuantity(t *testing.T, value, unit string) (int64, bool) {
	t.Helper()
	out, err := quantity(rego.BuiltinContext{}, ast.StringTerm(value), ast.StringTerm(unit))
	if err != nil {
		requireHalt(t, err)
		return 0, false
	}
	n, ok := out.Value.(ast.Number).Int64()
	if !ok {
		t.Fatalf("quantity(%q, %q) = %v, not an int64", value, unit, out)
	}
	return n, true
}

// rat is an accepted quantity string's exact value.
func rat(t *testing.T, s string) *big.Rat {
	t.Helper()
	q := resource.MustParse(s)
	r, ok := new(big.Rat).SetString(q.AsDec().String())
	if !ok {
		t.Fatalf("%q: no exact value", s)
	}
	return r
}

// requireHalt fails unless err halts the policy: a builtin's bad argument
// must fail the evaluation (and so the admission), never read as undefined.
func requireHalt(t *testing.T, err error) {
	t.Helper()
	var halt *rego.HaltError
	if !errors.As(err, &halt) {
		t.Fatalf("error is not a halt: %v", err)
	}
}

func checkConsumer(t *testing.T, c ledger.Consumer) {
	t.Helper()
	if c.Kind == "" || c.Name == "" {
		t.Fatalf("accepted a consumer without kind or name: %#v", c)
	}
}

func checkDimensions(t *testing.T, dims map[string]string) {
	t.Helper()
	for k, v := range dims {
		if msg := ledger.DimensionKeyError(k) + ledger.DimensionValueError(v); msg != "" {
			t.Fatalf("accepted dimension %q=%q: %s", k, v, msg)
		}
	}
}

// claimJSON is the argument a policy would write for c.
func claimJSON(c ledger.Claim) map[string]any {
	reqs := make([]any, len(c.Requests))
	for i, r := range c.Requests {
		m := map[string]any{"consumer": consumerJSON(r.Consumer), "resourceType": r.ResourceType, "amount": r.Amount}
		if r.Dimensions != nil {
			m["dimensions"] = dimensionsJSON(maps.Clone(r.Dimensions))
		}
		reqs[i] = m
	}
	o := c.Object
	return map[string]any{
		"id":       c.ID,
		"object":   map[string]any{"apiGroup": o.APIGroup, "kind": o.Kind, "namespace": o.Namespace, "name": o.Name, "uid": o.UID},
		"requests": reqs,
	}
}

func mustTerm(t *testing.T, v any) *ast.Term {
	t.Helper()
	term, err := toTerm(v)
	if err != nil {
		t.Fatal(err)
	}
	return term
}

// decodeClaimTerm is decodeClaim on a Rego value, as quota.reserve reads it.
func decodeClaimTerm(term *ast.Term) (ledger.Claim, ClaimMetadata, string, error) {
	v, err := toJSON("claim", term)
	if err != nil {
		return ledger.Claim{}, ClaimMetadata{}, "", err
	}
	return decodeClaim(v)
}

// decodeQueryTerm is decodeQuery on a Rego value, as quota.usage reads it.
func decodeQueryTerm(term *ast.Term) (ledger.BucketKey, error) {
	v, err := toJSON("query", term)
	if err != nil {
		return ledger.BucketKey{}, err
	}
	return decodeQuery(v)
}
