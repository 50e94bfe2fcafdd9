package v1alpha1

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Done when: a reservation is one string in status (what makes a busy
// bucket's writes cheap for the API server) and reads back exactly as it was
// written, whatever object it holds for.
func TestReservationRoundTrip(t *testing.T) {
	expires := metav1.NewMicroTime(time.Date(2026, 11, 23, 2, 23, 3, 123456000, time.UTC))
	for _, tc := range []struct {
		name string
		r    Reservation
		want string
	}{{
		name: "a create in a namespace, core group",
		r: Reservation{ID: "7c0f3b2e-1", Amount: 1, ExpiresAt: expires,
			Object: ObjectRef{Kind: "ConfigMap", Namespace: "team-a", Name: "web-config", UID: "7c0f3b2e-1"}},
		want: `"7c0f3b2e-1 1 2026-11-23T02:23:03.123456Z ConfigMap/team-a/web-config"`,
	}, {
		name: "an update's growth, named group",
		r: Reservation{ID: "9a1d/4/2", Amount: 500, ExpiresAt: expires,
			Object: ObjectRef{APIGroup: "apps", Kind: "Deployment", Namespace: "team-a", Name: "web", UID: "9a1d"}},
		want: `"9a1d/4/2 500 2026-11-23T02:23:03.123456Z Deployment.apps/team-a/web"`,
	}, {
		name: "an update's growth with the total it folds at",
		r: Reservation{ID: "9a1d/0/8", Amount: 8, Total: 9, ExpiresAt: expires,
			Object: ObjectRef{Kind: "ConfigMap", Namespace: "team-a", Name: "a", UID: "9a1d"}},
		want: `"9a1d/0/8 8 2026-11-23T02:23:03.123456Z ConfigMap/team-a/a total=9"`,
	}, {
		name: "a total and another uid",
		r: Reservation{ID: "claim-2/0/1", Amount: 1, Total: 3, ExpiresAt: expires,
			Object: ObjectRef{Kind: "ConfigMap", Namespace: "team-a", Name: "a", UID: "other"}},
		want: `"claim-2/0/1 1 2026-11-23T02:23:03.123456Z ConfigMap/team-a/a total=3 uid=other"`,
	}, {
		name: "a cluster-scoped object of a dotted group",
		r: Reservation{ID: "c3", Amount: 1, ExpiresAt: expires,
			Object: ObjectRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: "p1", UID: "c3"}},
		want: `"c3 1 2026-11-23T02:23:03.123456Z Project.resourcemanager.miloapis.com/p1"`,
	}, {
		name: "an object whose uid is not the id's",
		r: Reservation{ID: "claim-1", Amount: 8000, ExpiresAt: expires,
			Object: ObjectRef{APIGroup: "quota.miloapis.com", Kind: "ResourceClaim", Namespace: "team-a", Name: "c", UID: "other"}},
		want: `"claim-1 8000 2026-11-23T02:23:03.123456Z ResourceClaim.quota.miloapis.com/team-a/c uid=other"`,
	}, {
		name: "no uid at all",
		r:    Reservation{ID: "x", Amount: 0, ExpiresAt: expires, Object: ObjectRef{Kind: "Pod", Namespace: "n", Name: "p"}},
		want: `"x 0 2026-11-23T02:23:03.123456Z Pod/n/p uid="`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := json.Marshal(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != tc.want {
				t.Errorf("written %s\nwant    %s", data, tc.want)
			}
			var back Reservation
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.r, back); diff != "" {
				t.Errorf("read back (-written +read):\n%s", diff)
			}
		})
	}
}

// A reservation that does not read is an error naming it and what is wrong,
// so a bucket the ledger cannot understand fails the decision closed.
func TestParseReservationRefuses(t *testing.T) {
	const want = `; want "<id> <amount> <expiresAt> <kind>[.<apiGroup>]/[<namespace>/]<name> [total=<n>] [uid=<uid>]"`
	for in, msg := range map[string]string{
		"a 1 2026-11-23T02:23:03.123456Z":                            `reservation "a 1 2026-11-23T02:23:03.123456Z": 3 fields`,
		" 1 2026-11-23T02:23:03.123456Z Pod/n/p":                     `reservation " 1 2026-11-23T02:23:03.123456Z Pod/n/p": empty id`,
		"a -1 2026-11-23T02:23:03.123456Z Pod/n/p":                   `reservation "a -1 2026-11-23T02:23:03.123456Z Pod/n/p": amount "-1" is not a non-negative integer`,
		"a 99999999999999999999 2026-11-23T02:23:03.123456Z Pod/n/p": `reservation "a 99999999999999999999 2026-11-23T02:23:03.123456Z Pod/n/p": amount "99999999999999999999" is not a non-negative integer`,
		"a 1 tomorrow Pod/n/p":                                       `reservation "a 1 tomorrow Pod/n/p": expiresAt "tomorrow" is not an RFC 3339 time`,
		"a 1 2026-11-23T02:23:03.123456Z Pod":                        `reservation "a 1 2026-11-23T02:23:03.123456Z Pod": object "Pod" is not <kind>[.<apiGroup>]/[<namespace>/]<name>`,
		"a 1 2026-11-23T02:23:03.123456Z .apps/n/p":                  `reservation "a 1 2026-11-23T02:23:03.123456Z .apps/n/p": object ".apps/n/p" has no kind`,
		"a 1 2026-11-23T02:23:03.123456Z Pod/n/p owner=x":            `reservation "a 1 2026-11-23T02:23:03.123456Z Pod/n/p owner=x": field "owner=x" is not total=<n> or uid=<uid>, in that order`,
		"a 1 2026-11-23T02:23:03.123456Z Pod/n/p total=0":            `reservation "a 1 2026-11-23T02:23:03.123456Z Pod/n/p total=0": total "0" is not a positive integer`,
		"a 1 2026-11-23T02:23:03.123456Z Pod/n/p uid=x total=2":      `reservation "a 1 2026-11-23T02:23:03.123456Z Pod/n/p uid=x total=2": field "uid=x" is not total=<n> or uid=<uid>, in that order`,
	} {
		if _, err := ParseReservation(in); err == nil || err.Error() != msg+want {
			t.Errorf("ParseReservation(%q): %v\nwant %s", in, err, msg+want)
		}
	}
	var r Reservation
	if err := json.Unmarshal([]byte(`["a"]`), &r); err == nil {
		t.Error("a list where a string belongs: no error")
	}
}

// A bucket written before reservations were strings still reads, so an
// upgrade needs no migration: the next write rewrites it.
func TestReservationReadsTheEarlierObjectForm(t *testing.T) {
	var got Reservation
	if err := json.Unmarshal([]byte(`{"id":"9a1d/4/2","object":{"apiGroup":"apps","kind":"Deployment","namespace":"team-a","name":"web","uid":"9a1d"},"amount":500,"expiresAt":"2026-11-23T02:23:03.123456Z"}`), &got); err != nil {
		t.Fatal(err)
	}
	want := Reservation{ID: "9a1d/4/2", Amount: 500, ExpiresAt: metav1.NewMicroTime(time.Date(2026, 11, 23, 2, 23, 3, 123456000, time.UTC)),
		Object: ObjectRef{APIGroup: "apps", Kind: "Deployment", Namespace: "team-a", Name: "web", UID: "9a1d"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read (-want +got):\n%s", diff)
	}
	data, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != `"9a1d/4/2 500 2026-11-23T02:23:03.123456Z Deployment.apps/team-a/web"` {
		t.Errorf("rewritten as %s", data)
	}
}
