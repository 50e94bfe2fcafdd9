package kubestore

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// toBucket reads the ledger's state out of a bucket object's status.
func toBucket(key ledger.BucketKey, obj *quotav1alpha1.AllowanceBucket) ledger.Bucket {
	b := ledger.Bucket{Key: key}
	if obj == nil {
		return b
	}
	st := &obj.Status
	b.Limit = st.Limit
	for _, ref := range st.ContributingGrantRefs {
		b.Grants = append(b.Grants, ledger.GrantContribution{
			GrantID:    ledger.GrantID(ref.Namespace, ref.Name, int(ref.BucketIndex)),
			Amount:     ref.Amount,
			Generation: ref.ObservedGeneration,
		})
	}
	b.Allocated, b.Count = st.Allocated, int64(st.ClaimCount)
	if len(st.Namespaces) > 0 {
		b.ByNamespace = make(map[string]int64, len(st.Namespaces))
		for _, n := range st.Namespaces {
			b.ByNamespace[n.Namespace] = n.Allocated
		}
	}
	if len(st.Reservations) > 0 {
		b.Reservations = make(map[string]ledger.Reservation, len(st.Reservations))
		for _, r := range st.Reservations {
			b.Reservations[r.ID] = ledger.Reservation{
				ClaimID:   r.ID,
				Object:    ledgerconv.Object(r.Object),
				Amount:    r.Amount,
				Total:     r.Total,
				ExpiresAt: r.ExpiresAt.Time,
			}
		}
	}
	return b
}

// writeStatus renders b into obj.Status: the observed figures, the
// reservations, the totals, and the OverLimit condition. Lists are sorted
// (reservations by id, namespaces by name) so that an unchanged bucket
// renders byte-for-byte the same.
func writeStatus(obj *quotav1alpha1.AllowanceBucket, b ledger.Bucket, now metav1.Time) error {
	u, err := b.Usage()
	if err != nil {
		return fmt.Errorf("bucket %s: %w", obj.Name, err)
	}
	if b.Count < 0 || b.Count > math.MaxInt32 {
		return fmt.Errorf("bucket %s: count %d does not fit claimCount", obj.Name, b.Count)
	}
	st := &obj.Status
	st.Limit, st.Allocated, st.Reserved, st.Available = u.Limit, u.Allocated, u.Reserved, u.Available

	st.ContributingGrantRefs = st.ContributingGrantRefs[:0]
	for _, g := range b.Grants {
		ns, name, index := splitGrantID(g.GrantID)
		st.ContributingGrantRefs = append(st.ContributingGrantRefs, quotav1alpha1.ContributingGrantRef{
			Name: name, Namespace: ns, BucketIndex: index, Amount: g.Amount, ObservedGeneration: g.Generation,
		})
	}
	st.GrantCount = int32(len(st.ContributingGrantRefs))

	st.ClaimCount = int32(b.Count)
	st.Namespaces = st.Namespaces[:0]
	for ns, amount := range b.ByNamespace {
		st.Namespaces = append(st.Namespaces, quotav1alpha1.NamespaceUsage{Namespace: ns, Allocated: amount})
	}
	slices.SortFunc(st.Namespaces, func(a, b quotav1alpha1.NamespaceUsage) int { return strings.Compare(a.Namespace, b.Namespace) })

	st.Reservations = st.Reservations[:0]
	for id, r := range b.Reservations {
		st.Reservations = append(st.Reservations, quotav1alpha1.Reservation{
			ID:        id,
			Object:    ledgerconv.ObjectRef(r.Object),
			Amount:    r.Amount,
			Total:     r.Total,
			ExpiresAt: metav1.NewMicroTime(r.ExpiresAt),
		})
	}
	slices.SortFunc(st.Reservations, func(a, b quotav1alpha1.Reservation) int { return strings.Compare(a.ID, b.ID) })

	over := metav1.Condition{
		Type: quotav1alpha1.ConditionOverLimit, Status: metav1.ConditionFalse,
		Reason: quotav1alpha1.ReasonWithinLimit, Message: fmt.Sprintf("allocated %d of %d", u.Allocated, u.Limit),
		ObservedGeneration: obj.Generation, LastTransitionTime: now,
	}
	if u.Allocated > u.Limit {
		over.Status, over.Reason = metav1.ConditionTrue, quotav1alpha1.ReasonLimitLowered
		over.Message = fmt.Sprintf("allocated %d exceeds the limit %d: existing claims are kept, new ones are refused until usage falls below the limit", u.Allocated, u.Limit)
	}
	meta.SetStatusCondition(&st.Conditions, over)
	return nil
}

// splitGrantID reverses ledger.GrantID ("namespace/name#index").
func splitGrantID(id string) (namespace, name string, index int32) {
	namespace, rest, _ := strings.Cut(id, "/")
	name, idx, _ := strings.Cut(rest, "#")
	i, _ := strconv.ParseInt(idx, 10, 32) // ledger.GrantID always writes one
	return namespace, name, int32(i)
}
