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
//   - bucket (bucket_controller.go): keeps each AllowanceBucket's limit
//     true from the mirror, and pre-creates buckets from grants
//     (bucket_precreate.go). Usage is the observer's (package observer),
//     not a controller's.
//   - claim (claim_controller.go): decides Allocation claims through the
//     ledger (a reservation under the claim's uid, which the observer folds
//     once it counts the Granted claim) and releases them through the
//     finalizer; claim_status.go renders decisions, claim_id.go converts a
//     claim for the ledger.
//   - grantcreation (grantpolicy_controller.go): watches each Ready
//     GrantCreationPolicy's trigger and parent kinds (package dynwatch) and
//     keeps exactly the grant it renders for each trigger
//     (grantpolicy_grants.go).
//   - effective (effectiveresourcegrant_controller.go): the
//     EffectiveResourceGrant a tenant reads in each of the consumer's
//     namespaces.
//   - grantcreationpolicy and claimcreationpolicy (policy_controller.go,
//     one reconciler adapted to each kind): the Ready condition
//     (PolicyReady, ValidationFailed, PolicyDisabled).
//   - quotabypass (bypass_controller.go): holds the constraints an active
//     QuotaBypass names at warn, and restores them when it expires or is
//     deleted (package bypass does the constraint edits).
//
// Shared by all: the cache indexes (indexes.go), Options and ignoreConflict
// (conflicts.go).
//
// docs/controllers.md explains the decisions (which buckets are
// pre-created, how claims are decided and released, how the TTL works).
package controllers
