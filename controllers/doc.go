// Package controllers keeps every quota object true. Each controller is
// thin: decisions and arithmetic live in the ledger, validation rules in
// package validation, and a controller only reads the cluster, asks, and writes
// down the answer.
//
// Each controller lives in <kind>_controller.go, its helpers in
// <kind>_<aspect>.go; setup.go adds them all:
//
//   - registration (registration_controller.go): the Active condition; a
//     second registration of an active resource type is refused
//     (AlreadyRegistered).
//   - grant (grant_controller.go): judges grants against the registrations
//     (Active or ValidationFailed); the grant mirror turns Active grants into
//     limits.
//   - bucket (bucket_controller.go): keeps each AllowanceBucket true: limits
//     from the mirror, buckets pre-created from grants (bucket_precreate.go),
//     allocations repaired from the granted claims (bucket_drift.go).
//   - claim (claim_controller.go): decides Allocation claims through the
//     ledger, realizes admission claims, and releases both through the
//     finalizer; claim_status.go renders decisions, claim_id.go converts a
//     claim for the ledger.
//   - realization (realization_controller.go): turns an admission
//     reservation into claims owned by its object once the object exists
//     (realization_claims.go), or returns it once it expires; one subject,
//     the object reserved for, at a time.
//   - realization-watches (realization_watches.go): adds a watch, feeding
//     the realization controller, for each kind a registration claims.
//   - effective (effectiveresourcegrant_controller.go): the
//     EffectiveResourceGrant a tenant reads in each of the consumer's
//     namespaces.
//
// Shared by all: the cache indexes (indexes.go), Options and ignoreConflict
// (conflicts.go).
//
// docs/controllers.md explains the decisions (what the truth is for drift
// repair, which buckets are pre-created, how realization and TTL work).
package controllers
