package rego_test

import "testing"

// The template tests run again on the driver the manager's observer counts
// with (internal/preparedrego: each template's query prepared once), with
// the tests of the builtins' halts and of the observe mode: it must decide
// and word everything exactly as Gatekeeper's own driver, which the other
// tests run on.
func TestTemplatesOnTheObserversDriver(t *testing.T) {
	tests := append(templateTests(),
		templateTest{"FailsClosed", TestFailsClosed},
		templateTest{"HaltReadsAsUndecided", TestHaltReadsAsUndecided},
		templateTest{"ClaimPolicyWithoutPoliciesFailsClosed", TestClaimPolicyWithoutPoliciesFailsClosed},
		templateTest{"ClaimPolicyObservedRecordsTheClaimWithItsMetadata", TestClaimPolicyObservedRecordsTheClaimWithItsMetadata},
		templateTest{"ClaimPolicyLookup", TestClaimPolicyLookup},
	)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setMode(t, observersDriver)
			tc.test(t)
		})
	}
}
