package v1alpha1

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Reservation is written as "<id> <amount> <expiresAt> <object>", with
// object "<kind>[.<apiGroup>]/[<namespace>/]<name>", then "total=<n>" for an
// update's growth (the amount the object counts once the update is in
// place), and, only when the object's uid is not the id's first segment (it
// always is for what the ledger writes), "uid=<uid>". No field can hold a space:
// ids are uids with generation and growth numbers, and kinds, groups,
// namespaces and names are DNS names or labels (names cannot hold "/",
// kinds cannot hold "."), so the string splits back unambiguously.

// String is the reservation as status holds it.
func (r Reservation) String() string {
	var b strings.Builder
	b.WriteString(r.ID)
	b.WriteByte(' ')
	b.WriteString(strconv.FormatInt(r.Amount, 10))
	b.WriteByte(' ')
	b.WriteString(r.ExpiresAt.UTC().Format(metav1.RFC3339Micro))
	b.WriteByte(' ')
	b.WriteString(r.Object.Kind)
	if r.Object.APIGroup != "" {
		b.WriteByte('.')
		b.WriteString(r.Object.APIGroup)
	}
	b.WriteByte('/')
	if r.Object.Namespace != "" {
		b.WriteString(r.Object.Namespace)
		b.WriteByte('/')
	}
	b.WriteString(r.Object.Name)
	if r.Total != 0 {
		b.WriteString(" total=")
		b.WriteString(strconv.FormatInt(r.Total, 10))
	}
	if r.Object.UID != idUID(r.ID) {
		b.WriteString(" uid=")
		b.WriteString(r.Object.UID)
	}
	return b.String()
}

// ParseReservation reads a reservation as String writes it.
func ParseReservation(s string) (Reservation, error) {
	bad := func(format string, args ...any) (Reservation, error) {
		return Reservation{}, fmt.Errorf("reservation %q: %s; want \"<id> <amount> <expiresAt> <kind>[.<apiGroup>]/[<namespace>/]<name> [total=<n>] [uid=<uid>]\"", s, fmt.Sprintf(format, args...))
	}
	fields := strings.Split(s, " ")
	if len(fields) < 4 || len(fields) > 6 {
		return bad("%d fields", len(fields))
	}
	r := Reservation{ID: fields[0]}
	if r.ID == "" {
		return bad("empty id")
	}
	amount, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil || amount < 0 {
		return bad("amount %q is not a non-negative integer", fields[1])
	}
	r.Amount = amount
	expires, err := time.Parse(metav1.RFC3339Micro, fields[2])
	if err != nil {
		return bad("expiresAt %q is not an RFC 3339 time", fields[2])
	}
	r.ExpiresAt = metav1.NewMicroTime(expires)
	path := strings.Split(fields[3], "/")
	switch len(path) {
	case 2:
		r.Object.Name = path[1]
	case 3:
		r.Object.Namespace, r.Object.Name = path[1], path[2]
	default:
		return bad("object %q is not <kind>[.<apiGroup>]/[<namespace>/]<name>", fields[3])
	}
	r.Object.Kind, r.Object.APIGroup, _ = strings.Cut(path[0], ".")
	if r.Object.Kind == "" {
		return bad("object %q has no kind", fields[3])
	}
	r.Object.UID = idUID(r.ID)
	rest := fields[4:]
	if len(rest) > 0 {
		if v, ok := strings.CutPrefix(rest[0], "total="); ok {
			total, err := strconv.ParseInt(v, 10, 64)
			if err != nil || total <= 0 {
				return bad("total %q is not a positive integer", v)
			}
			r.Total, rest = total, rest[1:]
		}
	}
	if len(rest) > 0 {
		uid, ok := strings.CutPrefix(rest[0], "uid=")
		if !ok || len(rest) > 1 {
			return bad("field %q is not total=<n> or uid=<uid>, in that order", rest[0])
		}
		r.Object.UID = uid
	}
	return r, nil
}

// idUID is the uid a reservation id begins with: the object's uid for a
// create, "<uid>/<generation>/<growth>" for an update's growth, a claim's
// uid for an Allocation claim; "sum" for the ledger's sums ("sum/<n>"),
// whose object (ReservationSum) the ledger gives that uid, so they too are
// written without a "uid=" field.
func idUID(id string) string {
	uid, _, _ := strings.Cut(id, "/")
	return uid
}

// MarshalJSON writes the reservation as its string.
func (r Reservation) MarshalJSON() ([]byte, error) { return json.Marshal(r.String()) }

// legacyReservation is how reservations were written before they were
// strings. Buckets written then are still read: the first write after an
// upgrade rewrites them as strings, so upgrading needs no migration.
//
// Removal plan. Only builds before commit db33364 (2026-11-23) wrote this
// form, and none of them was tagged or released. A bucket holding one is
// rewritten by the observer of any later build once it folds or expires the
// reservation, within the reservation TTL (2 minutes by default: the
// plugin's reservationTTL, the manager's --reservation-ttl) of that build's
// manager starting; after that no stored bucket needs this. It is not dropped at once because a bucket that does
// still hold the object form would then fail to decode, and a typed list
// failing to decode stops the observer's bucket informer from syncing. It
// goes in the release after the first tagged one: the upgrade notes of
// docs/operations.md (Upgrading) say to run a build with it for longer than
// the TTL before moving to one without it, and give a check that nothing is
// left. Then delete this type, the '{' branch of UnmarshalJSON and
// TestReservationReadsTheEarlierObjectForm, and the sentence about it in
// docs/api.md.
type legacyReservation struct {
	ID        string           `json:"id"`
	Object    ObjectRef        `json:"object"`
	Amount    int64            `json:"amount"`
	ExpiresAt metav1.MicroTime `json:"expiresAt"`
}

// UnmarshalJSON reads the reservation from its string (or, written by an
// earlier version, its object).
func (r *Reservation) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '{' {
		var old legacyReservation
		if err := json.Unmarshal(data, &old); err != nil {
			return fmt.Errorf("reservation: %w", err)
		}
		*r = Reservation{ID: old.ID, Object: old.Object, Amount: old.Amount, ExpiresAt: old.ExpiresAt}
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("reservation: %w", err)
	}
	parsed, err := ParseReservation(s)
	if err != nil {
		return err
	}
	*r = parsed
	return nil
}
