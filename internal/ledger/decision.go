package ledger

import (
	"fmt"
	"strings"
)

// Reasons for a RequestDecision.
const (
	// ReasonQuotaAvailable: the request fits its bucket. In a denied decision
	// it marks a request that fit but was rolled back (or never attempted)
	// because another request of the claim did not fit.
	ReasonQuotaAvailable = "QuotaAvailable"
	// ReasonQuotaExceeded: the request does not fit its bucket.
	ReasonQuotaExceeded = "QuotaExceeded"
)

// Decision is the all-or-nothing outcome for a claim.
type Decision struct {
	Granted bool
	// Requests has one entry per distinct bucket, in the order the bucket
	// first appears in the claim; requests for the same bucket are merged.
	Requests []RequestDecision
}

// RequestDecision explains one bucket's part of a decision. Granted equals the
// claim's Decision.Granted: no request is held unless all are. When granted,
// the numbers are the bucket's state with the claim in it; otherwise they are
// the state that decided the request, without this claim's new entry.
type RequestDecision struct {
	Request   Request // merged; Amount is the sum for this bucket
	Bucket    string  // BucketKey.Name()
	Granted   bool
	Reason    string
	Limit     int64
	Allocated int64
	Reserved  int64
	Available int64
	Message   string
}

// Message joins the messages that explain the decision: every request's when
// granted, only the exceeded ones' when denied.
func (d Decision) Message() string {
	var msgs []string
	for _, r := range d.Requests {
		if d.Granted || r.Reason == ReasonQuotaExceeded {
			msgs = append(msgs, r.Message)
		}
	}
	return strings.Join(msgs, "; ")
}

func (r *RequestDecision) setUsage(u Usage) {
	r.Limit, r.Allocated, r.Reserved, r.Available = u.Limit, u.Allocated, u.Reserved, u.Available
}

func (r *RequestDecision) usage() Usage {
	return Usage{Limit: r.Limit, Allocated: r.Allocated, Reserved: r.Reserved, Available: r.Available}
}

func (r *RequestDecision) setMessage() {
	if r.Granted {
		r.Message = grantedMessage(r.Request.Amount, r.Request.ResourceType, r.usage())
	} else {
		r.Message = deniedMessage(r.Request.Amount, r.Request.ResourceType, r.usage())
	}
}

func grantedMessage(amount int64, resourceType string, u Usage) string {
	return fmt.Sprintf("granted %d of %s: available %d of %d (allocated %d, reserved %d)",
		amount, resourceType, u.Available, u.Limit, u.Allocated, u.Reserved)
}

func deniedMessage(amount int64, resourceType string, u Usage) string {
	return fmt.Sprintf("requested %d of %s, available %d of %d (allocated %d, reserved %d)",
		amount, resourceType, u.Available, u.Limit, u.Allocated, u.Reserved)
}
