// Package observer keeps every bucket's observed usage equal to the live
// objects: a bucket's allocated is the sum, over the live objects a deny
// quota constraint matches (and the Granted ResourceClaims), of what each
// counts against that bucket.
//
// It evaluates each object with the constraints' own Rego — the templates
// Gatekeeper runs, through the frameworks constraint client with
// Gatekeeper's admission target — as a synthetic CREATE, with the quota
// builtins in observe mode (builtins.WithRecorder): quota.reserve records
// the claim and grants it, so what an object counts is exactly what its
// admission would reserve (a QuotaClaimPolicy constraint's builtin renders
// its ClaimCreationPolicy from the policies this process holds, package
// claimpolicies over the manager's cache, with no requester: an empty
// user). It keeps per object what it counts (counting.Tally),
// and writes each changed bucket through ledger.Observe at most once per
// write interval, with the latest sums. In the same write it removes the
// reservations it now counts (fold) and those that expired with no object
// (expire): admission only reserves the in-flight window. With
// Options.ObjectClaims it also writes one ResourceClaim per counted object
// and consumer, a view of what the object counts (views.go, viewsync.go),
// on a queue and client of its own. The work runs on three controller-runtime
// controllers (controllers.go): evaluate, write, views.
//
// It is separate from package controllers because it is not a reconciler
// of one kind: it watches templates, constraints, every kind they match,
// namespaces, claims and buckets, and its state is a whole-cluster tally
// rebuilt from informers, not a per-object reconcile. What it counts by
// (what an object counts, the sums, which reservations a write folds or
// expires) is package counting's rule, pure and tested without a cluster,
// which quotactl's suites count by too.
package observer
