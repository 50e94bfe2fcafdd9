// Package delegation is seed 003's delegated subdivision as the ledger sees
// it: a parent consumer's admin hands parts of the parent's cap to its
// children with ResourceGrants that name the parent in spec.delegatedFrom,
// and the sum of what is handed out may never exceed the cap.
//
// No second reservation mechanism: the hand-outs of a parent for a resource
// type are counted in one more bucket of the ledger, the parent's
// delegation bucket (Key; resource type
// quotav1alpha1.DelegatedResourceType), whose limit is the parent's own
// limit of that resource type (the grant mirror reads it so). Handing out is
// the admission path: the manager's webhook reserves a create's amount, or
// an update's growth, all or nothing over the resource types of the grant
// (Claim), and the reservation is folded when the hand-out is counted. What
// is handed out is observed, not accumulated: Tally sums the live delegated
// grants, and the delegation controller writes that sum with ledger.Observe,
// folding the reservations of the grants it counts and expiring those whose
// grant never came. So lowering and deleting give back at once what they
// held (once observed), and two admins raising two children at once are
// decided by the bucket's compare-and-swap, as any two admissions are.
//
// It is a package of its own because the webhook, the controller and the
// CLI must read a hand-out identically, and none of them owns the rule.
package delegation
