package kubestore

import (
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
