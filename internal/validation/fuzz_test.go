package validation

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/grants"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// The fuzz targets judge objects decoded from JSON, as the webhooks receive
// them, against a fixed catalog. Seeds are in testdata/fuzz/<target>/;
// `make fuzz` runs each target (docs/operations.md).

func fuzzCatalog() *Catalog {
	return NewCatalog([]quotav1alpha1.ResourceRegistration{
		reg("projects", rtProjects, "active"),
		reg("cpu", rtCPU, "active", "region", "example.com/tier"),
		reg("new", "x/new", ""),
		reg("deleting", "x/deleting", "deleting"),
	})
}

// FuzzValidateGrant checks the grant rules the webhook and the grant
// controller apply: errors name fields under metadata or spec; a grant
// that passes them (and the CRD schema) converts to ledger grants, and,
// when its totals with another grant of the consumer pass too, every
// bucket's limit from both computes without overflow.
func FuzzValidateGrant(f *testing.F) {
	cat := fuzzCatalog()
	f.Fuzz(func(t *testing.T, grantJSON, otherJSON string) {
		var g, other quotav1alpha1.ResourceGrant
		if json.Unmarshal([]byte(grantJSON), &g) != nil || json.Unmarshal([]byte(otherJSON), &other) != nil {
			return
		}
		v := ValidateGrant(&g, cat, sysNS)
		totals := ValidateGrantTotals(&g, []quotav1alpha1.ResourceGrant{other})
		checkPaths(t, append(v.Errors, totals...))
		if again := ValidateGrant(&g, cat, sysNS); errorsOf(again) != errorsOf(v) {
			t.Fatalf("verdict not deterministic:\n%s\n%s", errorsOf(v), errorsOf(again))
		}
		if len(v.Errors) > 0 || !grantSchemaValid(&g) {
			return
		}
		lgs, err := grants.FromResourceGrant(&g)
		if err != nil {
			t.Fatalf("a valid grant does not convert: %v", err)
		}
		if len(totals) > 0 || !grantSchemaValid(&other) || other.Name == g.Name || other.Spec.ConsumerRef != g.Spec.ConsumerRef {
			return
		}
		others, err := grants.FromResourceGrant(&other)
		if err != nil {
			return
		}
		set := ledger.NewGrantSet()
		if err := set.Set(append(lgs, others...)...); err != nil {
			t.Fatalf("grant set: %v", err)
		}
		l := ledger.New(ledger.NewMemoryStore(), set)
		for _, a := range g.Spec.Allowances {
			for _, dims := range []map[string]string{nil, {"region": "dfw"}, {"region": "dfw", "example.com/tier": "gold"}} {
				key := ledger.NewBucketKey(ledgerconv.Consumer(g.Spec.ConsumerRef), a.ResourceType, dims)
				if _, _, err := l.Limit(key); err != nil {
					t.Fatalf("totals passed, but the limit of %s fails: %v", key.Name(), err)
				}
			}
		}
	})
}

// grantSchemaValid is what the CRD schema guarantees of a stored grant.
func grantSchemaValid(g *quotav1alpha1.ResourceGrant) bool {
	c := g.Spec.ConsumerRef
	if c.Kind == "" || c.Name == "" || len(g.Spec.Allowances) == 0 {
		return false
	}
	for _, a := range g.Spec.Allowances {
		if a.ResourceType == "" || len(a.Buckets) == 0 {
			return false
		}
		for _, b := range a.Buckets {
			if b.Amount < 0 {
				return false
			}
		}
	}
	return true
}

// FuzzValidateClaim checks the claim rules: errors name fields under spec;
// a claim that passes them (and the CRD schema) is one the ledger accepts
// as valid.
func FuzzValidateClaim(f *testing.F) {
	cat := fuzzCatalog()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{
		quotav1alpha1.ConsumerLabelKey(org.APIGroup, org.Kind): org.Name,
	}}}
	f.Fuzz(func(t *testing.T, claimJSON string) {
		var c quotav1alpha1.ResourceClaim
		if json.Unmarshal([]byte(claimJSON), &c) != nil {
			return
		}
		v := ValidateClaim(&c, cat, ns, sysNS)
		checkPaths(t, v.Errors)
		if len(v.Errors) > 0 || !claimSchemaValid(&c) {
			return
		}
		lc := ledger.Claim{ID: "claim-uid"}
		for _, r := range c.Spec.Requests {
			lc.Requests = append(lc.Requests, ledger.Request{
				Consumer: ledgerconv.Consumer(c.Spec.ConsumerRef), ResourceType: r.ResourceType, Amount: r.Amount, Dimensions: r.Dimensions,
			})
		}
		_, err := ledger.New(ledger.NewMemoryStore(), ledger.NewGrantSet()).Reserve(context.Background(), lc)
		var verr *ledger.ValidationError
		if errors.As(err, &verr) {
			for _, fe := range verr.Errors {
				// Two requests for one bucket may sum past int64: the
				// ledger's rule, decided when the claim is.
				if !errors.Is(fe.Err, ledger.ErrOverflow) {
					t.Fatalf("a valid claim is invalid to the ledger: %v", err)
				}
			}
		} else if err != nil {
			t.Fatalf("reserve: %v", err)
		}
	})
}

func claimSchemaValid(c *quotav1alpha1.ResourceClaim) bool {
	if c.Spec.ConsumerRef.Kind == "" || c.Spec.ConsumerRef.Name == "" || len(c.Spec.Requests) == 0 {
		return false
	}
	for _, r := range c.Spec.Requests {
		if r.ResourceType == "" || r.Amount < 1 {
			return false
		}
	}
	return true
}

// FuzzValidateRegistration checks that a registration's accepted
// dimensions are usable as bucket dimensions: a bucket key keeps them.
func FuzzValidateRegistration(f *testing.F) {
	f.Fuzz(func(t *testing.T, regJSON string) {
		var r quotav1alpha1.ResourceRegistration
		if json.Unmarshal([]byte(regJSON), &r) != nil {
			return
		}
		errs := ValidateRegistration(&r)
		checkPaths(t, errs)
		if len(errs) > 0 {
			return
		}
		dims := map[string]string{}
		for _, d := range r.Spec.Dimensions {
			dims[d] = "v"
		}
		key := ledger.NewBucketKey(ledger.Consumer{Kind: "K", Name: "n"}, "r", dims)
		if got := key.DimensionSet(); len(got) != len(dims) {
			t.Fatalf("dimensions %v become %v in a bucket key", dims, got)
		}
		for k, v := range key.DimensionSet() {
			if dims[k] != v {
				t.Fatalf("dimensions %v become %v in a bucket key", dims, key.DimensionSet())
			}
		}
	})
}

func checkPaths(t *testing.T, errs field.ErrorList) {
	t.Helper()
	for _, e := range errs {
		if !strings.HasPrefix(e.Field, "spec.") && !strings.HasPrefix(e.Field, "metadata.") {
			t.Fatalf("error without a field path under spec or metadata: %v", e)
		}
	}
}
