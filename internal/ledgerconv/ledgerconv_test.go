package ledgerconv_test

import (
	"testing"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

func TestConversionsRoundTrip(t *testing.T) {
	c := quotav1alpha1.ConsumerRef{APIGroup: "apps.example.com", Kind: "App", Name: "web", Namespace: "team-a"}
	if got := ledgerconv.ConsumerRef(ledgerconv.Consumer(c)); got != c {
		t.Errorf("consumer round trip: got %+v, want %+v", got, c)
	}
	o := quotav1alpha1.ObjectRef{APIGroup: "apps", Kind: "Deployment", Namespace: "team-a", Name: "web", UID: "u-1"}
	if got := ledgerconv.ObjectRef(ledgerconv.Object(o)); got != o {
		t.Errorf("object round trip: got %+v, want %+v", got, o)
	}
}

func TestKeyOfIsTheKeyTheBucketIsNamedAfter(t *testing.T) {
	b := &quotav1alpha1.AllowanceBucket{Spec: quotav1alpha1.AllowanceBucketSpec{
		ConsumerRef:  quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-a"},
		ResourceType: "core/configmaps",
		Dimensions:   map[string]string{"zone": "a"},
	}}
	want := ledger.NewBucketKey(ledger.Consumer{Kind: "Namespace", Name: "team-a"}, "core/configmaps", map[string]string{"zone": "a"})
	if got := ledgerconv.KeyOf(b); got != want {
		t.Errorf("KeyOf = %+v, want %+v", got, want)
	}
}
