package v1alpha1_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

func TestBucketLabelsLeaveOutWhatIsNoLabelValue(t *testing.T) {
	long := strings.Repeat("a", 64)
	want := map[string]string{quotav1alpha1.LabelConsumerKind: "Organization"}
	got := quotav1alpha1.BucketLabels(quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: long})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}
