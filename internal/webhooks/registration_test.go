package webhooks_test

import (
	"testing"

	"github.com/quotakeeper/quotakeeper/test/testenv"
)

func TestWebhookRejectsBadRegistrationDimensions(t *testing.T) {
	needEnv(t)
	reg := registration("t14-bad", "t14.example.com/cpu", organizationType, "region", "not a key!").Obj()
	testenv.RequireInvalid(t, k8s.Create(ctx, reg), "spec.dimensions[1]",
		`Invalid value: "not a key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`)
}
