package ledger

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// DimensionKeyError says why k cannot be a dimension key, or returns "" if it
// can. DimensionValueError does the same for a value. Dimensions are matched
// by grant label selectors and encoded into the bucket key's canonical
// "k=v,k=v" form, which is only unambiguous for label syntax, so keys are
// label keys and values label values. These two are the one statement of
// that rule: the ledger, the builtins' argument decoder and the API
// validation (registrations, claims) all ask them, each wording the error
// for its own callers.
func DimensionKeyError(k string) string {
	return strings.Join(validation.IsQualifiedName(k), "; ")
}

// DimensionValueError says why v cannot be a dimension value, or returns "".
func DimensionValueError(v string) string {
	return strings.Join(validation.IsValidLabelValue(v), "; ")
}

func validateConsumer(path string, c Consumer) []FieldError {
	var errs []FieldError
	if c.Kind == "" {
		errs = append(errs, FieldError{Field: path + ".kind", Detail: "must not be empty"})
	}
	if c.Name == "" {
		errs = append(errs, FieldError{Field: path + ".name", Detail: "must not be empty"})
	}
	return errs
}

// validateClaim reports every problem at once so a caller can fix a claim in
// one round trip.
func validateClaim(c Claim) error {
	var errs []FieldError
	switch {
	case c.ID == "":
		errs = append(errs, FieldError{Field: "id", Detail: "must not be empty"})
	case IsSum(c.ID):
		// A claim under a sum's id would replay, grow or release the sum.
		errs = append(errs, FieldError{Field: "id", Detail: fmt.Sprintf("must not begin with %q, which names the ledger's sums, got %q", SumPrefix, c.ID)})
	case IsLease(c.ID):
		// Nor under a lease's: it would replay or release the lease.
		errs = append(errs, FieldError{Field: "id", Detail: fmt.Sprintf("must not begin with %q, which names capacity leases, got %q", LeasePrefix, c.ID)})
	}
	if len(c.Requests) == 0 {
		errs = append(errs, FieldError{Field: "requests", Detail: "must not be empty"})
	}
	for i, r := range c.Requests {
		path := fmt.Sprintf("requests[%d]", i)
		errs = append(errs, validateConsumer(path+".consumer", r.Consumer)...)
		if r.ResourceType == "" {
			errs = append(errs, FieldError{Field: path + ".resourceType", Detail: "must not be empty"})
		}
		if r.Amount <= 0 {
			errs = append(errs, FieldError{Field: path + ".amount", Detail: fmt.Sprintf("must be positive, got %d", r.Amount)})
		}
		// An update's total includes its growth; a smaller one could
		// never hold back the fold it exists for.
		if r.Total != 0 && r.Total < r.Amount {
			errs = append(errs, FieldError{Field: path + ".total", Detail: fmt.Sprintf("must be 0 (a create) or at least amount %d, got %d", r.Amount, r.Total)})
		}
		// Sorted so the error text is deterministic.
		for _, k := range slices.Sorted(maps.Keys(r.Dimensions)) {
			field := fmt.Sprintf("%s.dimensions[%s]", path, k)
			if msg := DimensionKeyError(k); msg != "" {
				errs = append(errs, FieldError{Field: field, Detail: "invalid key: " + msg})
			}
			if msg := DimensionValueError(r.Dimensions[k]); msg != "" {
				errs = append(errs, FieldError{Field: field, Detail: fmt.Sprintf("invalid value %q: %s", r.Dimensions[k], msg)})
			}
		}
	}
	if len(errs) > 0 {
		return &ValidationError{Errors: errs}
	}
	return nil
}
