package kubestore

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakeeper/quotakeeper/api/ledgerconv"
	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/ledger"
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
	if len(st.Allocations) > 0 {
		b.Allocations = make(map[string]int64, len(st.Allocations))
		for _, a := range st.Allocations {
			b.Allocations[a.ID] = a.Amount
		}
	}
	if len(st.Reservations) > 0 {
		b.Reservations = make(map[string]ledger.Reservation, len(st.Reservations))
		for _, r := range st.Reservations {
			b.Reservations[r.ID] = ledger.Reservation{
				ClaimID:   r.ID,
				Object:    ledgerconv.Object(r.Object),
				Amount:    r.Amount,
				ExpiresAt: r.ExpiresAt.Time,
			}
		}
	}
	return b
}

// writeStatus renders b into obj.Status: the entries, the totals derived
// from them, and the OverLimit condition. Lists are sorted by id so that an
// unchanged bucket renders byte-for-byte the same.
func writeStatus(obj *quotav1alpha1.AllowanceBucket, b ledger.Bucket, now metav1.Time) error {
	u, err := b.Usage()
	if err != nil {
		return fmt.Errorf("bucket %s: %w", obj.Name, err)
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

	st.Allocations = st.Allocations[:0]
	for id, amount := range b.Allocations {
		st.Allocations = append(st.Allocations, quotav1alpha1.Allocation{ID: id, Amount: amount})
	}
	slices.SortFunc(st.Allocations, func(a, b quotav1alpha1.Allocation) int { return strings.Compare(a.ID, b.ID) })
	st.ClaimCount = int32(len(st.Allocations))

	st.Reservations = st.Reservations[:0]
	for id, r := range b.Reservations {
		st.Reservations = append(st.Reservations, quotav1alpha1.Reservation{
			ID:        id,
			Object:    ledgerconv.ObjectRef(r.Object),
			Amount:    r.Amount,
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
