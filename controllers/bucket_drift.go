package controllers

// Serves the bucket controller (bucket_controller.go): drift repair, the
// allocations a bucket must hold according to its claims.

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/ledger"
)

// claimState is what a claim says about its entry in a bucket.
type claimState int

const (
	// inFlight: undecided, pending, or being deleted. Its entry may be
	// about to be written or released; the bucket is the truth for now.
	inFlight claimState = iota
	// granted: its amount must be allocated under its id.
	granted
	// denied: it holds nothing.
	denied
)

func stateOf(c *quotav1alpha1.ResourceClaim) claimState {
	if c.DeletionTimestamp != nil {
		return inFlight
	}
	switch {
	case quotav1alpha1.IsTrue(c.Status.Conditions, quotav1alpha1.ConditionGranted, c.Generation):
		return granted
	case quotav1alpha1.IsFalse(c.Status.Conditions, quotav1alpha1.ConditionGranted, c.Generation):
		return denied
	}
	return inFlight
}

// planRepair compares a bucket object with the claims that draw on it and
// returns the fix that makes the bucket agree with them, and whether
// anything drifted. The truth for allocations is the claims: a granted
// claim's amount is allocated under its id; an entry that no claim
// accounts for (its claim was deleted without its finalizer running, or
// someone typed it in) is removed; a denied claim holds nothing. Claims in
// flight keep whatever the bucket says. Reservations are not judged here:
// nothing outside the bucket records them, and expiry returns them. obj is
// nil when the bucket does not exist.
func planRepair(key ledger.BucketKey, obj *quotav1alpha1.AllowanceBucket, claims []quotav1alpha1.ResourceClaim) (ledger.Fix, bool) {
	have := map[string]int64{}
	if obj != nil {
		for _, a := range obj.Status.Allocations {
			have[a.ID] = a.Amount
		}
	}
	name := key.Name()
	fix := ledger.Fix{Allocations: map[string]int64{}}
	accounted := map[string]bool{}
	for i := range claims {
		c := &claims[i]
		id := claimID(c)
		accounted[id] = true
		amount, ok := amountIn(c, name)
		if !ok {
			continue
		}
		switch stateOf(c) {
		case granted:
			if got, ok := have[id]; !ok || got != amount {
				fix.Allocations[id] = amount
			}
		case denied:
			if _, ok := have[id]; ok {
				fix.Remove = append(fix.Remove, id)
			}
		}
	}
	for id := range have {
		if !accounted[id] {
			fix.Remove = append(fix.Remove, id)
		}
	}
	slices.Sort(fix.Remove)
	fix.Rewrite = obj != nil && statusDrifted(obj)
	return fix, len(fix.Allocations) > 0 || len(fix.Remove) > 0 || fix.Rewrite
}

// amountIn is the amount claim c asks of the bucket named name.
func amountIn(c *quotav1alpha1.ResourceClaim, name string) (int64, bool) {
	for i, k := range claimBucketKeys(c) {
		if k.Name() == name {
			return c.Spec.Requests[i].Amount, true
		}
	}
	return 0, false
}

// statusDrifted reports whether the figures a bucket's status derives from
// its entries disagree with them: someone edited totals, counts or the
// OverLimit condition by hand, or listed an id twice. The store re-renders
// all of them on any write.
func statusDrifted(obj *quotav1alpha1.AllowanceBucket) bool {
	st := &obj.Status
	var allocated, reserved int64
	ok := true
	for _, a := range st.Allocations {
		allocated, ok = addOK(allocated, a.Amount, ok)
	}
	for _, r := range st.Reservations {
		reserved, ok = addOK(reserved, r.Amount, ok)
	}
	used, ok := addOK(allocated, reserved, ok)
	if !ok {
		return true
	}
	available := max(st.Limit-used, 0)
	if st.Allocated != allocated || st.Reserved != reserved || st.Available != available ||
		int(st.ClaimCount) != len(st.Allocations) || int(st.GrantCount) != len(st.ContributingGrantRefs) {
		return true
	}
	if !slices.IsSortedFunc(st.Allocations, func(a, b quotav1alpha1.Allocation) int { return strings.Compare(a.ID, b.ID) }) ||
		!slices.IsSortedFunc(st.Reservations, func(a, b quotav1alpha1.Reservation) int { return strings.Compare(a.ID, b.ID) }) {
		return true
	}
	for i := 1; i < len(st.Allocations); i++ {
		if st.Allocations[i].ID == st.Allocations[i-1].ID {
			return true
		}
	}
	for i := 1; i < len(st.Reservations); i++ {
		if st.Reservations[i].ID == st.Reservations[i-1].ID {
			return true
		}
	}
	if over := meta.FindStatusCondition(st.Conditions, quotav1alpha1.ConditionOverLimit); over != nil {
		if (over.Status == metav1.ConditionTrue) != (allocated > st.Limit) {
			return true
		}
	}
	return false
}

// addOK adds an entry's amount to a running total that stays broken once a
// step fails: on overflow, and on a negative amount, which the store never
// writes.
func addOK(a, b int64, ok bool) (int64, bool) {
	if !ok || b < 0 {
		return 0, false
	}
	sum, err := ledger.Add(a, b)
	return sum, err == nil
}
