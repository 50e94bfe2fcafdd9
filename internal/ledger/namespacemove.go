package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
)

// A namespace moved to another consumer (its consumer label changed) brings
// its objects' usage into the new consumer's buckets only once the observer
// has counted them there; until then admission would decide against buckets
// that lack them. So the consumer-label guard reserves what the namespace's
// objects will count there, before the move is stored, under the claim id
// NamespaceMoveID: the uid of the namespace and a digest of the labels it
// moves to. The observer folds the reservation once it has counted every
// object of the namespace under exactly those labels.
const namespaceMovePrefix = "namespace-move/"

// NamespaceMoveID is the claim id of the reservation a move of the
// namespace uid to labels holds. It never parses as an object's id
// (ReservationFor names the whole id as uid), so no object's count folds it.
func NamespaceMoveID(uid string, labels map[string]string) string {
	return namespaceMovePrefix + uid + "/" + LabelsDigest(labels)
}

// NamespaceMoveFor parses an id NamespaceMoveID made; ok is false for any
// other.
func NamespaceMoveFor(id string) (uid, digest string, ok bool) {
	rest, ok := strings.CutPrefix(id, namespaceMovePrefix)
	if !ok {
		return "", "", false
	}
	uid, digest, ok = strings.Cut(rest, "/")
	return uid, digest, ok && uid != "" && digest != ""
}

// LabelsDigest is a short digest of a label set: equal sets, equal digests.
func LabelsDigest(labels map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(labels[k]))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
