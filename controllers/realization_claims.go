package controllers

// Serves the realization controller (realization_controller.go): the claims
// it makes for a realized reservation, their grouping, names and specs.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/ledger"
	"github.com/quotakeeper/quotakeeper/ledger/kubestore"
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

// name is the claim's deterministic name: readable from the object, unique
// from a hash of the reservation id, consumer and dimensions, so a retry or
// a restarted manager finds the claim it already made.
func (g realizationClaim) name(obj quotav1alpha1.ObjectRef) string {
	c := g.consumer
	h := sha256.New()
	for _, f := range []string{"quotakeeper.realization/v1", g.id, c.APIGroup, c.Kind, c.Namespace, c.Name, g.dims} {
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		h.Write([]byte(f))
	}
	prefix := dnsPrefix(obj.Kind+"-"+obj.Name, 40)
	if prefix == "" {
		prefix = "reservation"
	}
	return prefix + "-" + hex.EncodeToString(h.Sum(nil)[:8])
}

// spec is the claim's spec: the reservations as requests.
func (g realizationClaim) spec(obj quotav1alpha1.ObjectRef) quotav1alpha1.ResourceClaimSpec {
	spec := quotav1alpha1.ResourceClaimSpec{ConsumerRef: kubestore.ConsumerRef(g.consumer), ResourceRef: &obj}
	for _, h := range g.held {
		req := quotav1alpha1.ResourceRequest{ResourceType: h.key.ResourceType, Amount: h.reservation.Amount}
		if dims := h.key.DimensionSet(); len(dims) > 0 {
			req.Dimensions = dims
		}
		spec.Requests = append(spec.Requests, req)
	}
	return spec
}

// dnsPrefix maps s to lowercase alphanumerics and single dashes, at most
// max bytes, so it can start a DNS-1123 subdomain.
func dnsPrefix(s string, max int) string {
	var b strings.Builder
	dash := false
	for i := 0; i < len(s) && b.Len() < max; i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			dash = true
			continue
		}
		if dash && b.Len() > 0 {
			b.WriteByte('-')
		}
		dash = false
		b.WriteByte(c)
	}
	return strings.TrimSuffix(b.String(), "-")
}
