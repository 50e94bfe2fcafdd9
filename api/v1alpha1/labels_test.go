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

// Consumer labels may not lie where the webhooks' matchConditions look
// away: the Kubernetes domains and their subdomains, nothing else.
func TestKubernetesReservedLabel(t *testing.T) {
	for key, want := range map[string]bool{
		"kubernetes.io/metadata.name":               true,
		"pod-security.kubernetes.io/enforce":        true,
		"app.kubernetes.io/name":                    true,
		"k8s.io/x":                                  true,
		"rbac.authorization.k8s.io/group":           true,
		"notkubernetes.io/x":                        false,
		"kubernetes.io.example.com/x":               false,
		"resourcemanager.miloapis.com/organization": false,
		"team": false,
	} {
		if got := quotav1alpha1.KubernetesReservedLabel(key); got != want {
			t.Errorf("KubernetesReservedLabel(%q) = %v, want %v", key, got, want)
		}
	}
}
