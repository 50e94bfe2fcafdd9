package webhooks_test

import (
	"testing"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakeeper/quotakeeper/test/testenv"
)

func TestWebhookRejectsBadRegistrationDimensions(t *testing.T) {
	needEnv(t)
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "t14-bad"},
		Spec: quotav1alpha1.ResourceRegistrationSpec{ConsumerTypeRef: organizationType, Type: quotav1alpha1.RegistrationTypeAllocation,
			ResourceType: "t14.example.com/cpu", BaseUnit: "unit", Dimensions: []string{"region", "not a key!"},
			ClaimingResources: []quotav1alpha1.GroupKind{{Kind: "ConfigMap"}}}}
	testenv.RequireInvalid(t, k8s.Create(ctx, reg), "spec.dimensions[1]",
		`Invalid value: "not a key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`)
}
