package webhooks

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/quotakeeper/quotakeeper/internal/counted"
)

const (
	uncheckedScale = `{"apiVersion": "constraints.gatekeeper.sh/v1beta1", "kind": "QuotaAllocation", "metadata": {"name": "cpu"},
		"spec": {"match": {"kinds": [{"apiGroups": ["apps"], "kinds": ["Deployment"]}]},
		"parameters": {"amount": {"resource": "cpu", "replicasPath": ["spec", "replicas"]}}}}`
	checkedScale = `{"apiVersion": "constraints.gatekeeper.sh/v1beta1", "kind": "QuotaAllocation", "metadata": {"name": "cpu"},
		"spec": {"match": {"kinds": [{"apiGroups": ["apps"], "kinds": ["Deployment"]}, {"apiGroups": ["autoscaling"], "kinds": ["Scale"]}]},
		"parameters": {"scaleTargets": [{"apiGroup": "apps", "kind": "Deployment"}], "amount": {"resource": "cpu", "replicasPath": ["spec", "replicas"]}}}}`
	// uncheckedScale relaxed by a QuotaBypass: a change that adds no problem.
	uncheckedScaleWarned = `{"apiVersion": "constraints.gatekeeper.sh/v1beta1", "kind": "QuotaAllocation", "metadata": {"name": "cpu"},
		"spec": {"enforcementAction": "warn", "match": {"kinds": [{"apiGroups": ["apps"], "kinds": ["Deployment"]}]},
		"parameters": {"amount": {"resource": "cpu", "replicasPath": ["spec", "replicas"]}}}}`
)

func TestQuotaConstraintValidator(t *testing.T) {
	for _, tc := range []struct {
		name           string
		op             admissionv1.Operation
		object, old    string
		allowed        bool
		inMessage      string
		warningsPrefix string
	}{
		{name: "a create that leaves the scale unchecked", op: admissionv1.Create, object: uncheckedScale,
			inMessage: `QuotaAllocation.constraints.gatekeeper.sh "cpu" is invalid: [spec.match.kinds: Required value: a QuotaAllocation whose amount depends on replicas`},
		{name: "a create that checks it", op: admissionv1.Create, object: checkedScale, allowed: true},
		{name: "an update that breaks it", op: admissionv1.Update, object: uncheckedScale, old: checkedScale,
			inMessage: "spec.parameters.scaleTargets: Required value"},
		{name: "an update of a constraint made before the rule, adding no problem", op: admissionv1.Update, object: uncheckedScaleWarned, old: uncheckedScale,
			allowed: true, warningsPrefix: "spec.match.kinds: Required value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: tc.op, Object: runtime.RawExtension{Raw: []byte(tc.object)},
			}}
			if tc.old != "" {
				req.OldObject = runtime.RawExtension{Raw: []byte(tc.old)}
			}
			resp := QuotaConstraintValidator{}.Handle(context.Background(), req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed %v, want %v: %+v", resp.Allowed, tc.allowed, resp.Result)
			}
			if tc.inMessage != "" && (resp.Result == nil || !strings.Contains(resp.Result.Message, tc.inMessage)) {
				t.Errorf("message %+v, want it to contain %q", resp.Result, tc.inMessage)
			}
			if tc.warningsPrefix != "" && (len(resp.Warnings) != 2 || !strings.HasPrefix(resp.Warnings[0], tc.warningsPrefix)) {
				t.Errorf("warnings %q, want two, the first beginning %q", resp.Warnings, tc.warningsPrefix)
			}
		})
	}
}

// The versioner writes the constraint's policy version into its
// parameters, and nothing when it already carries the right one.
func TestQuotaConstraintVersioner(t *testing.T) {
	handle := func(raw string) admission.Response {
		return QuotaConstraintVersioner{}.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(raw)},
		}})
	}
	c := &unstructured.Unstructured{}
	if err := c.UnmarshalJSON([]byte(checkedScale)); err != nil {
		t.Fatal(err)
	}
	version, err := counted.Version(c)
	if err != nil {
		t.Fatal(err)
	}
	resp := handle(checkedScale)
	if !resp.Allowed || len(resp.Patches) != 1 {
		t.Fatalf("allowed %v, patches %+v: want one patch", resp.Allowed, resp.Patches)
	}
	if p := resp.Patches[0]; p.Operation != "add" || p.Path != "/spec/parameters/policyVersion" || p.Value != version {
		t.Errorf("patch %+v, want add /spec/parameters/policyVersion %q", p, version)
	}

	if err := unstructured.SetNestedField(c.Object, version, "spec", "parameters", counted.Field); err != nil {
		t.Fatal(err)
	}
	stamped, err := c.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if resp := handle(string(stamped)); !resp.Allowed || len(resp.Patches) != 0 {
		t.Errorf("already stamped: allowed %v, patches %+v, want none", resp.Allowed, resp.Patches)
	}
	if err := unstructured.SetNestedField(c.Object, "QuotaAllocation/cpu/0000000000000000", "spec", "parameters", counted.Field); err != nil {
		t.Fatal(err)
	}
	stale, _ := c.MarshalJSON()
	resp = handle(string(stale))
	if len(resp.Patches) != 1 || resp.Patches[0].Operation != "replace" || resp.Patches[0].Value != version {
		t.Errorf("stale version: patches %+v, want replace with %q", resp.Patches, version)
	}
}
