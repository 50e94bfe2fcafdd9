// Package grants is ResourceGrants as the ledger sees them. FromResourceGrant
// converts one object into ledger grants (IDs, selector semantics); Active
// says which objects count; a Mirror keeps a ledger.GrantSource in step with
// the cluster's ResourceGrants through an informer, Source turns its changes
// into a syncing controller-runtime source, and NewLedger wires a manager's
// ledger over it.
//
// It is a package of its own because the ledger knows no API types, while
// three programs must read grants identically: the quotakeeper manager (for
// the controllers' ledger) and Gatekeeper's plugin (for the builtins' ledger)
// each run a Mirror over their own informer cache, and quotactl converts with
// the same function offline, so a grant contributes the same limit wherever
// it is read.
//
// Only active grants count: a grant whose Active condition is True for its
// current generation. While a changed grant waits for the grant controller
// to judge its new generation, the mirror keeps the amounts it last saw
// active, so an edit never drops a consumer's limit to zero for the
// moments in between; a grant judged inactive, or deleted, is dropped at
// once.
package grants
