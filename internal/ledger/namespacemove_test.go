package ledger_test

import (
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// A move's id names the namespace and the labels it moves to, and no
// object's id parsing takes it for an object's: no object's count folds it.
func TestNamespaceMoveIDNamesTheNamespaceAndItsLabels(t *testing.T) {
	labels := map[string]string{"resourcemanager.miloapis.com/organization": "acme", "team": "a"}
	id := ledger.NamespaceMoveID("uid-1", labels)
	uid, digest, ok := ledger.NamespaceMoveFor(id)
	if !ok || uid != "uid-1" || digest != ledger.LabelsDigest(labels) {
		t.Fatalf("NamespaceMoveFor(%q) = %q, %q, %t", id, uid, digest, ok)
	}
	if same := ledger.LabelsDigest(map[string]string{"team": "a", "resourcemanager.miloapis.com/organization": "acme"}); same != digest {
		t.Fatalf("the same labels in another order digest to %q, want %q", same, digest)
	}
	if other := ledger.LabelsDigest(map[string]string{"resourcemanager.miloapis.com/organization": "acme", "team": "b"}); other == digest {
		t.Fatalf("other labels digest to the same %q", other)
	}
	if objUID, _, update := ledger.ReservationFor(id); objUID != id || update {
		t.Fatalf("ReservationFor(%q) = %q, update %t: want the whole id, no update", id, objUID, update)
	}
	for _, other := range []string{"uid-1", "uid-1/3/2", "namespace-move/", "namespace-move/uid-1", "namespace-move//abc"} {
		if _, _, ok := ledger.NamespaceMoveFor(other); ok {
			t.Errorf("NamespaceMoveFor(%q) took it for a move", other)
		}
	}
}
