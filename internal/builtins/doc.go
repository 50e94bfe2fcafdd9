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
// # Registration and the Env
//
// OPA's builtin table is process-global, and Gatekeeper's frameworks rego
// driver evaluates with it (it takes no functions of its own): Register adds
// the builtins there and must run before any Rego compiler or frameworks
// driver is created, because a driver copies the table (its capabilities)
// when it is built. The hosting process calls it once: Gatekeeper's overlay
// init() (package plugin), quotactl's and the manager's main, and each test
// binary's TestMain.
//
// What the builtins decide against — the ledger, the registrations' units,
// the ClaimCreationPolicies quota.policy_claim renders, the counted policy
// versions and the deadline — is an Env, which the hosting process builds
// (a memory-store ledger for quotactl and tests, the Kubernetes store inside
// Gatekeeper) and the package never stores. An evaluation finds it in its
// context (WithEnv: quotactl's suites, the observer, Rego tests), or else
// asks the process's, which the process handed to Register as a function
// (Gatekeeper's admission and audit, the OPA CLI under quotactl opa, whose
// evaluations it cannot give a context). So two evaluations with different
// ledgers run side by side, and the package keeps no mutable state
// (golangci-lint's gochecknoglobals holds it to that).
//
// Call calls one builtin by name against a given Env, with its arguments
// as JSON values: how the manager's External Data provider (package
// externaldata) answers a stock Gatekeeper's external_data calls from the
// templates' twins, with the very implementations Register registers.
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
