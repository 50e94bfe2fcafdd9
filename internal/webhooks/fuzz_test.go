package webhooks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/celpolicy"
)

// FuzzPolicyValidators feeds the creation-policy webhooks policies decoded
// from JSON, as the apiserver sends them. A refusal is an Invalid error whose
// every cause names a field under spec (or metadata.name); an admitted policy compiles (what
// the status controller and the code acting on it rely on); an update that
// leaves the spec alone is always admitted, and one that changes it is judged
// exactly as a create. The grant controller and claim webhook's validation
// is fuzzed in package validation. Seeds: testdata/fuzz/FuzzPolicyValidators/.
func FuzzPolicyValidators(f *testing.F) {
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, grantJSON, claimJSON string) {
		var gp quotav1alpha1.GrantCreationPolicy
		if json.Unmarshal([]byte(grantJSON), &gp) == nil {
			_, err := GrantPolicyValidator{}.ValidateCreate(ctx, &gp)
			checkInvalid(t, err)
			if err == nil {
				if p, errs := celpolicy.CompileGrantPolicy(&gp); p == nil || len(errs) > 0 {
					t.Fatalf("admitted a grant policy that does not compile: %v", errs)
				}
			}
			if _, uerr := (GrantPolicyValidator{}).ValidateUpdate(ctx, gp.DeepCopy(), &gp); uerr != nil {
				t.Fatalf("an update that keeps the spec was refused: %v", uerr)
			}
			_, uerr := GrantPolicyValidator{}.ValidateUpdate(ctx, &quotav1alpha1.GrantCreationPolicy{}, &gp)
			if errText(uerr) != errText(err) && !emptyGrantSpec(&gp) {
				t.Fatalf("update judged unlike create:\n%v\n%v", uerr, err)
			}
		}
		var cp quotav1alpha1.ClaimCreationPolicy
		if json.Unmarshal([]byte(claimJSON), &cp) == nil {
			_, err := ClaimPolicyValidator{}.ValidateCreate(ctx, &cp)
			checkInvalid(t, err)
			if err == nil {
				if p, errs := celpolicy.CompileClaimPolicy(&cp); p == nil || len(errs) > 0 {
					t.Fatalf("admitted a claim policy that does not compile: %v", errs)
				}
			}
			if _, uerr := (ClaimPolicyValidator{}).ValidateUpdate(ctx, cp.DeepCopy(), &cp); uerr != nil {
				t.Fatalf("an update that keeps the spec was refused: %v", uerr)
			}
		}
	})
}

// emptyGrantSpec: an update from an empty spec to an empty spec changes
// nothing, so it is admitted whatever a create would say.
func emptyGrantSpec(p *quotav1alpha1.GrantCreationPolicy) bool {
	return apiequality.Semantic.DeepEqual(p.Spec, quotav1alpha1.GrantCreationPolicySpec{})
}

func checkInvalid(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	status, ok := err.(apierrors.APIStatus)
	if !ok || !apierrors.IsInvalid(err) {
		t.Fatalf("refusal is not an Invalid status: %v", err)
	}
	details := status.Status().Details
	if details == nil || len(details.Causes) == 0 {
		t.Fatalf("refusal names no field: %v", err)
	}
	for _, c := range details.Causes {
		// metadata.name: a grant policy's name labels its grants, so it
		// must be a valid label value.
		if !strings.HasPrefix(c.Field, "spec.") && c.Field != "metadata.name" {
			t.Fatalf("refusal cause without a field under spec or metadata.name: %+v in %v", c, err)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzValidateBypassSpec feeds the QuotaBypass webhook's spec check specs
// decoded from JSON. A refusal names only fields under spec; an admitted
// spec is one the controller and the plugin's audit can act on: a reason
// that is not blank, a duration above zero and within the maximum, and at
// least one constraint, each with a kind and a name. Seeds:
// testdata/fuzz/FuzzValidateBypassSpec/.
func FuzzValidateBypassSpec(f *testing.F) {
	const maxDuration = time.Hour
	f.Fuzz(func(t *testing.T, specJSON string) {
		var s quotav1alpha1.QuotaBypassSpec
		if json.Unmarshal([]byte(specJSON), &s) != nil {
			return
		}
		errs := ValidateBypassSpec(&s, maxDuration)
		for _, e := range errs {
			if !strings.HasPrefix(e.Field, "spec.") {
				t.Fatalf("refusal without a field under spec: %v", e)
			}
		}
		if len(errs) > 0 {
			return
		}
		if strings.TrimSpace(s.Reason) == "" || s.Duration.Duration <= 0 || s.Duration.Duration > maxDuration || len(s.Constraints) == 0 {
			t.Fatalf("admitted %+v", s)
		}
		for _, c := range s.Constraints {
			if c.Kind == "" || c.Name == "" {
				t.Fatalf("admitted a constraint without kind or name: %+v", s)
			}
		}
	})
}
