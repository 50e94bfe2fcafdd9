package plugin

import (
	"context"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// bypassList is the QuotaBypasses the auditor reads.
type bypassList []quotav1alpha1.QuotaBypass

func (l bypassList) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	panic("not read")
}

func (l bypassList) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.(*quotav1alpha1.QuotaBypassList).Items = l
	return nil
}

// gatekeeperSays answers every request as Gatekeeper's validation handler
// would with these warnings.
type gatekeeperSays []string

func (w gatekeeperSays) Handle(context.Context, admission.Request) admission.Response {
	return admission.Allowed("").WithWarnings(w...)
}

// The auditor records what an active bypass lets through, leaves other
// warnings alone, and denies what an ended bypass still holds relaxed.
func TestBypassAuditor(t *testing.T) {
	now := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	bypass := func(name string, created time.Time, constraints []string, relaxed ...string) quotav1alpha1.QuotaBypass {
		b := quotav1alpha1.QuotaBypass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
			Spec: quotav1alpha1.QuotaBypassSpec{Reason: "INC-42", Duration: metav1.Duration{Duration: 10 * time.Minute}}}
		for _, c := range constraints {
			b.Spec.Constraints = append(b.Spec.Constraints, quotav1alpha1.BypassedConstraint{Kind: "QuotaEntity", Name: c})
		}
		for _, r := range relaxed {
			b.Status.Relaxed = append(b.Status.Relaxed, quotav1alpha1.RelaxedConstraint{Kind: "QuotaEntity", Name: r, EnforcementAction: "deny"})
		}
		return b
	}
	active := bypass("active", now.Add(-time.Minute), []string{"cms"})
	wildcard := bypass("wildcard", now.Add(-time.Minute), []string{"*"}, "pods")
	ended := bypass("ended", now.Add(-11*time.Minute), []string{"secrets", "jobs"}, "secrets")
	const quotaMsg = "quota exceeded for Namespace team-a: requested 1 of core/configmaps, available 0 of 1 (allocated 1, reserved 0)"
	req := func(dryRun bool) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Namespace: "team-a", Object: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"cm-2","uid":"u-2"}}`)},
			UserInfo: authenticationv1.UserInfo{Username: "tara"}, DryRun: &dryRun,
		}}
	}
	for _, c := range []struct {
		name     string
		bypasses bypassList
		warnings gatekeeperSays
		dryRun   bool
		denied   string // the denial, or "" for the warnings passed on
		events   []string
	}{
		{name: "active bypass names the constraint", bypasses: bypassList{active}, warnings: gatekeeperSays{"[cms] " + quotaMsg},
			events: []string{"Warning QuotaBypassed tara: CREATE ConfigMap team-a/cm-2 admitted over quota (constraint cms: " + quotaMsg + "); bypass reason: INC-42"}},
		{name: "status lists a constraint a wildcard relaxed", bypasses: bypassList{wildcard}, warnings: gatekeeperSays{"[pods] over"},
			events: []string{"Warning QuotaBypassed tara: CREATE ConfigMap team-a/cm-2 admitted over quota (constraint pods: over); bypass reason: INC-42"}},
		{name: "dry run records nothing", bypasses: bypassList{active}, warnings: gatekeeperSays{"[cms] " + quotaMsg}, dryRun: true},
		{name: "other constraints' warnings", bypasses: bypassList{active}, warnings: gatekeeperSays{"[labels] add a team label", "no prefix"}},
		{name: "ended bypass still holds the constraint", bypasses: bypassList{ended, active}, warnings: gatekeeperSays{"[secrets] " + quotaMsg, "[cms] " + quotaMsg},
			denied: "[secrets] " + quotaMsg,
			events: []string{"Warning QuotaBypassed tara: CREATE ConfigMap team-a/cm-2 admitted over quota (constraint cms: " + quotaMsg + "); bypass reason: INC-42"}},
		{name: "ended bypass never relaxed it", bypasses: bypassList{ended}, warnings: gatekeeperSays{"[jobs] mind the limit"}},
		{name: "another active bypass took it over", bypasses: bypassList{ended, bypass("heir", now, []string{"secrets"})}, warnings: gatekeeperSays{"[secrets] " + quotaMsg},
			events: []string{"Warning QuotaBypassed tara: CREATE ConfigMap team-a/cm-2 admitted over quota (constraint secrets: " + quotaMsg + "); bypass reason: INC-42"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			a := &BypassAuditor{Handler: c.warnings, Reader: c.bypasses, Recorder: rec, Now: func() time.Time { return now }}
			resp := a.Handle(context.Background(), req(c.dryRun))
			if c.denied != "" {
				if resp.Allowed || resp.Result.Message != c.denied {
					t.Fatalf("allowed %t message %q, want denied with %q", resp.Allowed, resp.Result.Message, c.denied)
				}
			} else if !resp.Allowed || len(resp.Warnings) != len(c.warnings) {
				t.Fatalf("allowed %t warnings %q, want allowed with %q", resp.Allowed, resp.Warnings, c.warnings)
			}
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if len(got) != len(c.events) {
				t.Fatalf("events %q, want %q", got, c.events)
			}
			for i := range got {
				if got[i] != c.events[i] {
					t.Fatalf("event %q, want %q", got[i], c.events[i])
				}
			}
		})
	}
}
