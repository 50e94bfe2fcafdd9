package delegation

import (
	"slices"
	"strings"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// Child is one live hand-out counted in a delegation bucket.
type Child struct {
	Grant      string // namespace/name
	Consumer   ledger.Consumer
	UID        string
	Generation int64
	Amount     int64
}

// Tally is what the live delegated grants hand out, by delegation bucket.
type Tally map[ledger.BucketKey][]Child

// Count tallies grants (every ResourceGrant the caller sees; platform
// grants count nothing here, and a grant being deleted holds what it hands
// out until it is gone). A grant whose amounts do not sum is skipped and
// its error returned, for the caller to report.
func Count(grants []quotav1alpha1.ResourceGrant) (Tally, []error) {
	t := Tally{}
	var errs []error
	for i := range grants {
		g := &grants[i]
		amounts, err := Amounts(g)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for rt, amount := range amounts {
			key := Key(Parent(g), rt)
			t[key] = append(t[key], Child{
				Grant: g.Namespace + "/" + g.Name, Consumer: ledgerconv.Consumer(g.Spec.ConsumerRef), UID: string(g.UID),
				Generation: g.Generation, Amount: amount,
			})
		}
	}
	for _, children := range t {
		slices.SortFunc(children, func(a, b Child) int { return strings.Compare(a.Grant, b.Grant) })
	}
	return t, errs
}

// Observation is what the delegation bucket key counts: allocated is the
// sum handed out, split by the namespace of the grants, and every hand-out
// counted at its generation so that the write folds its reservations.
func (t Tally) Observation(key ledger.BucketKey) (ledger.Observation, error) {
	obs := ledger.Observation{Counted: map[string]ledger.CountedAt{}}
	for _, c := range t[key] {
		sum, err := ledger.Add(obs.Allocated, c.Amount)
		if err != nil {
			return ledger.Observation{}, err
		}
		obs.Allocated = sum
		obs.Count++
		if c.Amount > 0 {
			if obs.ByNamespace == nil {
				obs.ByNamespace = map[string]int64{}
			}
			ns := namespaceOf(c.Grant)
			obs.ByNamespace[ns] += c.Amount // within Allocated, which did not overflow
		}
		obs.Counted[c.UID] = ledger.CountedAt{Generation: c.Generation, Amount: c.Amount}
	}
	return obs, nil
}

func namespaceOf(grant string) string {
	ns, _, _ := strings.Cut(grant, "/")
	return ns
}
