// Package builtins exposes quotakeeper's ledger to Rego as OPA builtins:
//
//	quota.reserve(claim)        reserve a claim, all or nothing; returns the decision
//	quota.usage(query)          read one bucket's limit, allocated, reserved, available
//	quota.quantity(value, unit) a Kubernetes quantity as a whole number of unit, rounded up
//	quota.display(amount, units) an amount in its display unit, exactly ("0.5", "10/3")
//	quota.policy_claim(request) what a ClaimCreationPolicy claims for one object
//
// The argument and result shapes are documented in docs/policy-authoring.md
// and on each declaration (see Capabilities).
//
// # Registration and the ledger
//
// OPA builtins are process-global: Register adds them to OPA's builtin table
// and must run before any Rego compiler or frameworks driver is created,
// because a driver copies the table (its capabilities) when it is built.
// Gatekeeper's overlay init() calls it; tests call it from TestMain.
//
// Which ledger the builtins use is the hosting process's choice, made with
// Use: a memory-store ledger for quotactl and tests, the Kubernetes store
// inside Gatekeeper. The ClaimCreationPolicies quota.policy_claim renders
// are set the same way, with UseClaimPolicies, and the registrations' units
// that quota.reserve and quota.usage return with UseUnits. Both are package-level
// settings because OPA gives a builtin no other way to reach process state.
//
// A review's context may carry a Reservations (WithReservations): quota.reserve
// then records there what each granted call added, so that the hosting
// process can give it back when the review ends in a denial
// (reservations.go).
//
// # Failing closed
//
// Every failure — no ledger, invalid input, a store error — is returned as a
// rego.NewHaltError. A plain error from a builtin only makes the call
// undefined, and an undefined quota check in a ConstraintTemplate produces no
// violation: the request would be admitted. A halt error stops the
// evaluation instead, and the frameworks driver turns it into a violation
// carrying the error message, so Gatekeeper denies. A refused reservation is
// not an error: quota.reserve returns a decision with granted false.
//
// A halt ends the evaluation of every constraint of the template at once:
// the driver gives each of them the one error as its violation. That is
// right for a failure no constraint can get past (the store is down), wrong
// for one constraint's own problem. So quota.policy_claim answers a
// policy's problem (a CEL error for this object, a policy not found) with
// {"error": msg}, which the template reports as its own constraint's
// violation, and halts only for what concerns every policy.
package builtins
