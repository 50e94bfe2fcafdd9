package rego_test

import (
	"context"
	"fmt"
	"testing"
	"testing/fstest"
	"time"

	constraintclient "github.com/open-policy-agent/frameworks/constraint/pkg/client"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/drivers/rego"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/reviews"
	"github.com/open-policy-agent/frameworks/constraint/pkg/types"
	"github.com/open-policy-agent/gatekeeper/v3/apis"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/reader"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/target"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/util"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/quotakeeper/quotakeeper/ledger"
)

// trivialTemplate reads the object and decides nothing: the cost of a
// Gatekeeper Review itself (target handling, input conversion, one Rego
// query), against which the quota templates' cost is stated.
const trivialTemplate = `apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: trivial
spec:
  crd:
    spec:
      names:
        kind: Trivial
  targets:
    - target: admission.k8s.gatekeeper.sh
      code:
        - engine: Rego
          source:
            version: v1
            rego: |
              package trivial

              violation contains {"msg": "forbidden"} if input.review.object.metadata.labels.forbidden == "true"
`

func newTrivialClient(b *testing.B) *constraintclient.Client {
	b.Helper()
	driver, err := rego.New(rego.Externs("inventory"))
	if err != nil {
		b.Fatal(err)
	}
	c, err := constraintclient.NewClient(
		constraintclient.Targets(&target.K8sValidationTarget{}),
		constraintclient.Driver(driver),
		constraintclient.EnforcementPoints(util.WebhookEnforcementPoint, util.AuditEnforcementPoint),
	)
	if err != nil {
		b.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := apis.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	tmpl, err := reader.ReadTemplate(scheme, fstest.MapFS{"t.yaml": {Data: []byte(trivialTemplate)}}, "t.yaml")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.AddTemplate(ctx, tmpl); err != nil {
		b.Fatal(err)
	}
	constraint := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "constraints.gatekeeper.sh/v1beta1",
		"kind":       "Trivial",
		"metadata":   map[string]any{"name": "trivial"},
	}}
	if _, err := c.AddConstraint(ctx, constraint); err != nil {
		b.Fatal(err)
	}
	return c
}

type reviewer interface {
	Review(ctx context.Context, obj any, opts ...reviews.ReviewOpt) (*types.Responses, error)
}

func timeReview(b *testing.B, c reviewer, review any, opts []reviews.ReviewOpt, wantViolations int) time.Duration {
	start := time.Now()
	resp, err := c.Review(context.Background(), review, opts...)
	elapsed := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	if got := len(resp.Results()); got != wantViolations {
		b.Fatalf("%d violations, want %d: %v", got, wantViolations, messages(resp.Results()))
	}
	return elapsed
}

// BenchmarkReviewQuotaEntityVersusTrivial reviews the same ConfigMap with
// QuotaEntity and with a trivial template, alternating in one loop so both
// see the same machine conditions, and reports each one's time per review
// and their ratio:
//
//   - admission: a CREATE that reserves (granted); the reservation is
//     released outside the timed region so the bucket stays one entry big;
//   - denied: a CREATE refused at the limit (the ledger's refusal path and
//     the message);
//   - audit: an existing object, read-only (quota.usage for the over-limit
//     report).
func BenchmarkReviewQuotaEntityVersusTrivial(b *testing.B) {
	for _, mode := range []string{"admission", "denied", "audit"} {
		b.Run(mode, func(b *testing.B) {
			h := newHarness(b, "quotaentity", perNamespace)
			limit := int64(1 << 40)
			if mode == "denied" {
				limit = 0
			}
			h.grant("g", teamA, "core/configmaps", limit)
			trivial := newTrivialClient(b)
			wantQuota := 0
			if mode == "denied" {
				wantQuota = 1
			}

			var quotaTime, trivialTime time.Duration
			n := 0
			for b.Loop() {
				obj := configMap("team-a", fmt.Sprint("cm-", n))
				var review any
				opts := []reviews.ReviewOpt{reviews.EnforcementPoint(util.WebhookEnforcementPoint)}
				if mode == "audit" {
					review = target.AugmentedUnstructured{Object: unstructured.Unstructured{Object: obj}}
					opts = []reviews.ReviewOpt{reviews.EnforcementPoint(util.AuditEnforcementPoint)}
				} else {
					review = target.AugmentedReview{IsAdmission: true, AdmissionRequest: &admissionv1.AdmissionRequest{
						UID:       k8stypes.UID(fmt.Sprint("req-", n)),
						Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
						Operation: admissionv1.Create,
						Name:      obj["metadata"].(map[string]any)["name"].(string),
						Namespace: "team-a",
						Object:    runtime.RawExtension{Raw: mustJSON(b, obj)},
					}}
				}
				trivialTime += timeReview(b, trivial, review, opts, 0)
				quotaTime += timeReview(b, h.client, review, opts, wantQuota)
				if mode == "admission" {
					b.StopTimer()
					claim := ledger.Claim{ID: "uid-team-a-" + fmt.Sprint("cm-", n), Requests: []ledger.Request{{Consumer: teamA, ResourceType: "core/configmaps", Amount: 1}}}
					if err := h.ledger.Release(context.Background(), claim); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				n++
			}
			b.ReportMetric(float64(quotaTime.Nanoseconds())/float64(n), "quota-ns/review")
			b.ReportMetric(float64(trivialTime.Nanoseconds())/float64(n), "trivial-ns/review")
			b.ReportMetric(float64(quotaTime)/float64(trivialTime), "quota/trivial")
		})
	}
}
