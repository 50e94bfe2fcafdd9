package quotafile

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/delegation"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// handOuts judges the delegated grants read as the manager's grant webhook
// would have admitted them, one after another in the order read: each must
// fit its parent's cap (the grants of delegated/<type> read) beside the
// ones before it, or the set is refused with the webhook's message. A file
// set that hands out more than a cap describes a cluster that cannot exist.
// (Whether a grant's namespace belongs to its parent needs the namespace,
// which quota files do not hold: the webhook judges that.)
func handOuts(src ledger.GrantSource, read []sourced[*v1alpha1.ResourceGrant]) error {
	l := ledger.New(ledger.NewMemoryStore(), src)
	ctx := context.Background()
	var admitted []v1alpha1.ResourceGrant
	var errs []error
	for _, s := range read {
		if !s.obj.IsDelegated() {
			continue
		}
		g := s.obj.DeepCopy()
		if g.UID == "" {
			g.UID = types.UID("file/" + g.Namespace + "/" + g.Name) // the claim's id: one per grant
		}
		claim, ok, err := delegation.Claim(nil, g)
		if err != nil || !ok {
			errs = append(errs, err)
			continue
		}
		d, err := l.Reserve(ctx, claim)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: ResourceGrant %s/%s: %w", s.path, g.Namespace, g.Name, err))
			continue
		}
		if !d.Granted {
			tally, _ := delegation.Count(admitted)
			for _, rd := range d.Requests {
				if rd.Reason == ledger.ReasonQuotaExceeded {
					key := ledger.NewBucketKey(rd.Request.Consumer, rd.Request.ResourceType, nil)
					errs = append(errs, fmt.Errorf("%s: ResourceGrant %s/%s: %s", s.path, g.Namespace, g.Name,
						delegation.Denial(rd.Request.Consumer, ledgerconv.Consumer(g.Spec.ConsumerRef), rd, tally[key])))
				}
			}
			continue
		}
		admitted = append(admitted, *g)
		// Counted at once, as the delegation controller would count it:
		// the message of a later refusal says it is handed out.
		tally, _ := delegation.Count(admitted)
		for _, rt := range keysOfAmounts(g) {
			key := delegation.Key(delegation.Parent(g), rt)
			obs, err := tally.Observation(key)
			if err == nil {
				_, err = l.Observe(ctx, key, obs)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func keysOfAmounts(g *v1alpha1.ResourceGrant) []string {
	amounts, _ := delegation.Amounts(g)
	out := make([]string, 0, len(amounts))
	for rt := range amounts {
		out = append(out, rt)
	}
	return out
}
