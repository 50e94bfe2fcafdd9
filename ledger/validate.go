package ledger

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

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
	if c.ID == "" {
		errs = append(errs, FieldError{Field: "id", Detail: "must not be empty"})
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
		// Sorted so the error text is deterministic.
		for _, k := range slices.Sorted(maps.Keys(r.Dimensions)) {
			field := fmt.Sprintf("%s.dimensions[%s]", path, k)
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				errs = append(errs, FieldError{Field: field, Detail: "invalid key: " + strings.Join(msgs, "; ")})
			}
			if msgs := validation.IsValidLabelValue(r.Dimensions[k]); len(msgs) > 0 {
				errs = append(errs, FieldError{Field: field, Detail: fmt.Sprintf("invalid value %q: %s", r.Dimensions[k], strings.Join(msgs, "; "))})
			}
		}
	}
	if len(errs) > 0 {
		return &ValidationError{Errors: errs}
	}
	return nil
}
