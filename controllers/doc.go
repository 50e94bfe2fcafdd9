// Package controllers keeps every quota object true. Each controller is
// thin: decisions and arithmetic live in the ledger, validation rules in
// package webhooks, and a controller only reads the cluster, asks, and writes
// down the answer.
//
//   - registration: the Active condition; a second registration of an active
//     resource type is refused (AlreadyRegistered).
//   - grant: judges grants against the registrations (Active or
//     ValidationFailed); the grant mirror turns Active grants into limits.
//   - bucket: keeps each AllowanceBucket true: limits from the mirror,
//     buckets pre-created from grants, allocations repaired from the granted
//     claims.
//   - claim: decides Allocation claims through the ledger, realizes
//     admission claims, and releases both through the finalizer.
//   - realization: turns an admission reservation into a claim owned by its
//     object once the object exists, or returns it once it expires.
//   - effective: the EffectiveResourceGrant a tenant reads in each of the
//     consumer's namespaces.
//
// docs/controllers.md explains the decisions (what the truth is for drift
// repair, which buckets are pre-created, how realization and TTL work).
package controllers
