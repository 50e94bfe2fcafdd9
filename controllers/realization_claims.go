package controllers

// Serves the realization controller (realization_controller.go): the claims
// it makes for a realized reservation, their grouping, names and specs.

import (
	"slices"
	"strings"

	"github.com/quotakeeper/quotakeeper/api/ledgerconv"
	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/ledger"
	"github.com/quotakeeper/quotakeeper/names"
)

// heldReservation is one reservation and the bucket holding it.
type heldReservation struct {
	key         ledger.BucketKey
	reservation quotav1alpha1.Reservation
}

// realizationClaim is one claim the realization controller makes: the
// reservations of one id, one consumer and one dimension set. A claim has
// one consumer and at most one request per resource type, so an object that
// reserved against its namespace and its organization gets two claims.
type realizationClaim struct {
	id       string
	consumer ledger.Consumer
	dims     string
	held     []heldReservation
}

// groupForClaims splits reservations into the claims that realize them,
// in a stable order.
func groupForClaims(held []heldReservation) []realizationClaim {
	type groupKey struct {
		id       string
		consumer ledger.Consumer
		dims     string
	}
	index := map[groupKey]int{}
	var out []realizationClaim
	for _, h := range held {
		k := groupKey{h.reservation.ID, h.key.Consumer, h.key.Dimensions}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, realizationClaim{id: k.id, consumer: k.consumer, dims: k.dims})
		}
		out[i].held = append(out[i].held, h)
	}
	for i := range out {
		slices.SortFunc(out[i].held, func(a, b heldReservation) int { return strings.Compare(a.key.ResourceType, b.key.ResourceType) })
	}
	slices.SortFunc(out, func(a, b realizationClaim) int {
		return strings.Compare(a.name(quotav1alpha1.ObjectRef{}), b.name(quotav1alpha1.ObjectRef{}))
	})
	return out
}

// claimNames name realization claims: readable from the object, unique from
// a hash of the reservation id, consumer and dimensions, so a retry or a
// restarted manager finds the claim it already made.
var claimNames = names.Scheme{Tag: "quotakeeper.realization/v1", Fallback: "reservation", PrefixMax: 40, HashBytes: 8}

// name is the claim's deterministic name (see claimNames).
func (g realizationClaim) name(obj quotav1alpha1.ObjectRef) string {
	c := g.consumer
	return claimNames.Name(obj.Kind+"-"+obj.Name, g.id, c.APIGroup, c.Kind, c.Namespace, c.Name, g.dims)
}

// spec is the claim's spec: the reservations as requests.
func (g realizationClaim) spec(obj quotav1alpha1.ObjectRef) quotav1alpha1.ResourceClaimSpec {
	spec := quotav1alpha1.ResourceClaimSpec{ConsumerRef: ledgerconv.ConsumerRef(g.consumer), ResourceRef: &obj}
	for _, h := range g.held {
		req := quotav1alpha1.ResourceRequest{ResourceType: h.key.ResourceType, Amount: h.reservation.Amount}
		if dims := h.key.DimensionSet(); len(dims) > 0 {
			req.Dimensions = dims
		}
		spec.Requests = append(spec.Requests, req)
	}
	return spec
}
