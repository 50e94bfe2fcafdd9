// Package validation holds every rule about quotakeeper's API objects that
// the CRD schema cannot state: which registration governs a resource type
// (Catalog), whether a registration's dimensions are label keys, whether a
// grant lives with its consumer's buckets and fits its registrations, and
// whether a claim's namespace may claim for its consumer (ClaimConsumer,
// which also judges the claim a ClaimCreationPolicy renders for an object,
// in package claimpolicies).
//
// It is separate because three callers judge the same objects and must
// judge them alike: the webhooks refuse a bad object at once, the
// controllers judge again when they act (a webhook only sees the
// registrations of the moment), and quotactl judges files offline. None of
// them owns the rules, so none of them holds them.
package validation
