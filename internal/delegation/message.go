package delegation

import (
	"fmt"
	"strings"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// Denial explains a refused hand-out to the admin who asked: whose cap,
// how large, how much of it is handed out and to whom, how much is in
// flight, and what was asked for whom. rd is the ledger's refusal (its
// numbers are the bucket's at the moment it decided); children are the
// live hand-outs of that bucket as the caller's cache holds them (Tally),
// which name the "whom".
func Denial(parent ledger.Consumer, child ledger.Consumer, rd ledger.RequestDecision, children []Child) string {
	base, _ := quotav1alpha1.DelegatedBase(rd.Request.ResourceType)
	var to []string
	for _, c := range children {
		to = append(to, fmt.Sprintf("%d to %s (%s)", c.Amount, consumerString(c.Consumer), c.Grant))
	}
	whom := "nothing yet"
	if len(to) > 0 {
		whom = strings.Join(to, ", ")
	}
	return fmt.Sprintf("cap exceeded: %s's cap of %s is %d, handed out %d (%s), in flight %d, available %d: cannot hand out %d more to %s",
		consumerString(parent), base, rd.Limit, rd.Allocated, whom, rd.Reserved, rd.Available, rd.Request.Amount, consumerString(child))
}

func consumerString(c ledger.Consumer) string {
	name := c.Name
	if c.Namespace != "" {
		name = c.Namespace + "/" + c.Name
	}
	return c.Kind + " " + name
}
