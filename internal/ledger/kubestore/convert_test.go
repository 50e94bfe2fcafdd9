package kubestore

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

func TestStatusRoundTripsTheBucket(t *testing.T) {
	key := ledger.NewBucketKey(ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}, "projects", nil)
	expires := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	b := ledger.Bucket{
		Key: key, Limit: 10,
		Grants:      []ledger.GrantContribution{{GrantID: "quotakeeper-system/acme#1", Amount: 10, Generation: 3}},
		Allocated:   6,
		ByNamespace: map[string]int64{"team-b": 2, "": 1, "team-a": 3},
		Count:       4,
		Reservations: map[string]ledger.Reservation{"u2/3": {
			ClaimID: "u2/3", Object: ledger.ObjectRef{Kind: "ConfigMap", Namespace: "team-a", Name: "c", UID: "u2"}, Amount: 1, ExpiresAt: expires,
		}},
	}
	obj := &quotav1alpha1.AllowanceBucket{}
	if err := writeStatus(obj, b, metav1.Now()); err != nil {
		t.Fatal(err)
	}
	wantNamespaces := []quotav1alpha1.NamespaceUsage{{Namespace: "", Allocated: 1}, {Namespace: "team-a", Allocated: 3}, {Namespace: "team-b", Allocated: 2}}
	if diff := cmp.Diff(wantNamespaces, obj.Status.Namespaces); diff != "" {
		t.Fatalf("namespaces not one sorted entry each (-want +got):\n%s", diff)
	}
	st := obj.Status
	if st.Allocated != 6 || st.Reserved != 1 || st.Available != 3 || st.ClaimCount != 4 || st.GrantCount != 1 {
		t.Fatalf("totals %+v", st)
	}
	if diff := cmp.Diff(b, toBucket(key, obj)); diff != "" {
		t.Fatalf("round trip (-written +read):\n%s", diff)
	}
}

// A sum is stored like any reservation, in the API's one-string form: its
// object and count read back unchanged, and no "uid=" field is written (the
// uid the string form derives from "sum/<n>" is the sum's own).
func TestStatusRoundTripsASum(t *testing.T) {
	key := ledger.NewBucketKey(ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}, "projects", nil)
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	id := ledger.SumPrefix + strconv.FormatInt(at.UnixMicro(), 10)
	b := ledger.Bucket{Key: key, Limit: 100, Reservations: map[string]ledger.Reservation{
		id: {ClaimID: id, Object: ledger.SumObject(57), Amount: 120, ExpiresAt: at},
	}}
	obj := &quotav1alpha1.AllowanceBucket{}
	if err := writeStatus(obj, b, metav1.Now()); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`"reservations":[%q]`, id+" 120 2030-01-02T03:04:05.000006Z ReservationSum.quota.miloapis.com/57")
	if !strings.Contains(string(raw), want) {
		t.Fatalf("stored as %s, want %s", raw, want)
	}
	read := &quotav1alpha1.AllowanceBucket{}
	if err := json.Unmarshal(raw, read); err != nil {
		t.Fatal(err)
	}
	got := toBucket(key, read)
	if diff := cmp.Diff(b, got); diff != "" {
		t.Fatalf("round trip (-written +read):\n%s", diff)
	}
	if r := got.Reservations[id]; ledger.SumCount(r) != 57 || ledger.Compactable(r) {
		t.Fatalf("read back %+v: count %d, compactable %v", r, ledger.SumCount(r), ledger.Compactable(r))
	}
}
