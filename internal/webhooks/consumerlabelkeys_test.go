package webhooks

import "testing"

// An extra consumer label the guard's matchCondition would never send it is
// refused when the manager starts, naming the key.
func TestCheckConsumerLabelKeysRefusesKubernetesDomains(t *testing.T) {
	if err := CheckConsumerLabelKeys([]string{"team", "example.com/tenant"}); err != nil {
		t.Errorf("keys outside Kubernetes' domains: %v", err)
	}
	const want = "pod-security.kubernetes.io/tenant lies in a domain Kubernetes reserves (kubernetes.io, k8s.io): the namespace guard is not called for it, so it cannot be guarded"
	if err := CheckConsumerLabelKeys([]string{"team", "pod-security.kubernetes.io/tenant"}); err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}
