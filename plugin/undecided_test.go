package plugin

import (
	"context"
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// gatekeeperDenies answers every request as Gatekeeper's validation handler
// does when constraints deny: "[<constraint>] <message>" a line each.
type gatekeeperDenies string

func (m gatekeeperDenies) Handle(context.Context, admission.Request) admission.Response {
	return admission.Denied(string(m))
}

// A tenant never reads OPA's halt text: the denial says quota could not
// decide, why, and what to do; a warn constraint's warning alike.
func TestReadableFailures(t *testing.T) {
	const halt = `[configmaps] libs["lib_0"]:612: eval_builtin_error: quota.reserve: reserving claim "uid-1": allowancebuckets.quota.miloapis.com "b" is forbidden`
	const want = `[configmaps] quota cannot decide: reserving claim "uid-1": allowancebuckets.quota.miloapis.com "b" is forbidden; the request is denied and nothing was reserved. Retry in a minute; if it keeps failing, tell your platform team (docs/troubleshooting.md#quota-cannot-decide)`
	resp := ReadableFailures{Handler: gatekeeperDenies(halt)}.Handle(context.Background(), admission.Request{})
	if resp.Allowed || resp.Result.Message != want {
		t.Errorf("denial: allowed %t message\n%s\nwant\n%s", resp.Allowed, resp.Result.Message, want)
	}
	resp = ReadableFailures{Handler: gatekeeperSays{halt, "[other] stays"}}.Handle(context.Background(), admission.Request{})
	if !resp.Allowed || !slices.Equal(resp.Warnings, []string{want, "[other] stays"}) {
		t.Errorf("warnings: allowed %t %q, want %q", resp.Allowed, resp.Warnings, []string{want, "[other] stays"})
	}
}
