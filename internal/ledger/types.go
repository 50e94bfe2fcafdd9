package ledger

import (
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// Consumer is who consumes quota: typically a Project or an Organization.
// Namespace is empty for cluster-scoped consumers.
type Consumer struct {
	APIGroup  string
	Kind      string
	Name      string
	Namespace string
}

// ObjectRef is the object a claim is for. It is carried into reservations so
// that an operator looking at a bucket can tell which pending object holds
// quota.
type ObjectRef struct {
	APIGroup  string
	Kind      string
	Namespace string
	Name      string
	UID       string
}

// Request asks for Amount of ResourceType from Consumer's bucket selected by
// Dimensions. Dimension keys and values must be valid label keys and values:
// they are matched by grant label selectors and are encoded into the bucket
// key's canonical "k=v,k=v" form, which is only unambiguous for label syntax.
//
// Total is set for the growth of an update: what the object counts against
// the bucket once the update is in place (its old amount plus Amount). The
// observer folds the reservation only once it counts the object at Total or
// more, so an update still in flight (or rejected later in the admission
// chain) stays reserved even when the object's kind keeps one generation
// through it. Zero for a create: counting the object at all folds it.
type Request struct {
	Consumer     Consumer
	ResourceType string
	Amount       int64
	Total        int64
	Dimensions   map[string]string
}

// Claim is the unit of all-or-nothing admission. ID is the idempotency key:
// every reservation the claim creates is stored under it, so replays, the
// observer's fold and expiry, and release all find them by ID alone.
type Claim struct {
	ID       string
	Object   ObjectRef
	Requests []Request
}

// Grant is one amount of quota given to a consumer for a resource type,
// optionally restricted to buckets whose dimensions match Selector (nil means
// every bucket). A ResourceGrant object with several bucket amounts becomes
// several Grant values; GrantID builds their IDs ("namespace/name#index") so
// that each contribution to a bucket's limit is individually traceable.
type Grant struct {
	ID           string
	Generation   int64
	Consumer     Consumer
	ResourceType string
	Amount       int64
	Selector     labels.Selector
}

// GrantContribution records that a grant (at a generation) contributed Amount
// to a bucket's limit, so the persisted limit can be explained and checked
// against the grant objects.
type GrantContribution struct {
	GrantID    string
	Amount     int64
	Generation int64
}

// Reservation holds quota for an object that was admitted but is not counted
// yet. It expires so that quota held by admissions that never produced an
// object (rejected later in the admission chain, client gave up) comes back:
// the observer removes it once ExpiresAt has passed and the object is absent.
//
// Total is the request's Total: what the object must count in this bucket
// for the reservation to be folded (0: anything).
type Reservation struct {
	ClaimID   string
	Object    ObjectRef
	Amount    int64
	Total     int64
	ExpiresAt time.Time
}

// CountedAt is how the observer counts an object in one bucket: at which
// generation it evaluated it, and the amount it counts there.
type CountedAt struct {
	Generation int64
	Amount     int64
}

// FoldedBy reports whether an object counted at c accounts for r: it has
// reached the reservation's generation and counts at least its Total. This
// is the one fold rule; the observer's plan and Observe's write both ask it.
// No object accounts for a sum ("sum/<n>" would parse as uid "sum" at
// generation n) or a lease: only the observer's barrier frees one (sums.go,
// leases.go).
func (r Reservation) FoldedBy(c CountedAt) bool {
	if IsSum(r.ClaimID) || IsLease(r.ClaimID) {
		return false
	}
	_, g, _ := ReservationFor(r.ClaimID)
	return c.Generation >= g && c.Amount >= r.Total
}

// Usage is the arithmetic summary of one bucket.
type Usage struct {
	Limit     int64
	Allocated int64
	Reserved  int64
	Available int64
}
