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
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/test/builders"
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

func timeReview(b *testing.B, ctx context.Context, c reviewer, review any, opts []reviews.ReviewOpt, wantViolations int) time.Duration {
	start := time.Now()
	resp, err := c.Review(ctx, review, opts...)
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
				review, opts := benchReview(b, mode, n)
				trivialTime += timeReview(b, context.Background(), trivial, review, opts, 0)
				quotaTime += timeReview(b, h.evalCtx(), h.client, review, opts, wantQuota)
				if mode == "admission" {
					b.StopTimer()
					releaseBenchClaim(b, h.ledger, n)
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

// benchReview is the n-th review of a benchmark mode: a CREATE of ConfigMap
// team-a/cm-<n> (admission, denied), or the object as audit sees it.
func benchReview(b *testing.B, mode string, n int) (any, []reviews.ReviewOpt) {
	obj := configMap("team-a", fmt.Sprint("cm-", n))
	if mode == "audit" {
		return target.AugmentedUnstructured{Object: unstructured.Unstructured{Object: obj}},
			[]reviews.ReviewOpt{reviews.EnforcementPoint(util.AuditEnforcementPoint)}
	}
	return target.AugmentedReview{IsAdmission: true, AdmissionRequest: &admissionv1.AdmissionRequest{
		UID:       k8stypes.UID(fmt.Sprint("req-", n)),
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Operation: admissionv1.Create,
		Name:      obj["metadata"].(map[string]any)["name"].(string),
		Namespace: "team-a",
		Object:    runtime.RawExtension{Raw: mustJSON(b, obj)},
	}}, []reviews.ReviewOpt{reviews.EnforcementPoint(util.WebhookEnforcementPoint)}
}

// releaseBenchClaim releases what the admission of benchReview's n-th
// ConfigMap reserved, so the bucket stays one entry big.
func releaseBenchClaim(b *testing.B, l *ledger.Ledger, n int) {
	claim := ledger.Claim{ID: "uid-team-a-" + fmt.Sprint("cm-", n), Requests: []ledger.Request{{Consumer: teamA, ResourceType: "core/configmaps", Amount: 1}}}
	if err := l.Release(context.Background(), claim); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReviewQuotaClaimPolicyVersusQuotaEntity reviews the same
// ConfigMap with a QuotaClaimPolicy constraint, whose ClaimCreationPolicy
// counts one core/configmaps per ConfigMap against its namespace (the
// consumer name a CEL template), and with a QuotaEntity constraint counting
// the same, alternating in one loop; it reports each one's time per review
// and their ratio (issue 11's goal: policy/entity <= 1.2). Each template
// has its own ledger (each review carries its harness's Env), in the modes
// of BenchmarkReviewQuotaEntityVersusTrivial.
func BenchmarkReviewQuotaClaimPolicyVersusQuotaEntity(b *testing.B) {
	for _, mode := range []string{"admission", "denied", "audit"} {
		b.Run(mode, func(b *testing.B) {
			limit := int64(1 << 40)
			want := 0
			if mode == "denied" {
				limit, want = 0, 1
			}
			entity := newHarness(b, "quotaentity", perNamespace)
			entity.grant("g", teamA, "core/configmaps", limit)
			policy := policyHarness(b, builders.ClaimPolicy("configmaps", "v1", "ConfigMap", namespaceOfTrigger).Generation(1).
				Request("core/configmaps", intstr.FromInt32(1)).Obj())
			policy.grant("g", teamA, "core/configmaps", limit)

			alternate(b, mode, want, named{"policy", policy}, named{"entity", entity})
		})
	}
}

// BenchmarkDriverReview reviews the same ConfigMap CREATE with QuotaEntity
// on Gatekeeper's Rego driver (the frameworks', which prepares its query
// again for every review) and on the observer's (internal/preparedrego,
// prepared once per template), alternating in one loop, and reports each
// one's time per review and their ratio. Each has its own ledger.
func BenchmarkDriverReview(b *testing.B) {
	frameworks := newHarness(b, "quotaentity", perNamespace)
	frameworks.grant("g", teamA, "core/configmaps", 1<<40)
	setMode(b, observersDriver)
	prepared := newHarness(b, "quotaentity", perNamespace)
	prepared.grant("g", teamA, "core/configmaps", 1<<40)
	alternate(b, "admission", 0, named{"prepared", prepared}, named{"frameworks", frameworks})
}

// named is a harness a benchmark reports under name.
type named struct {
	name string
	*harness
}

// alternate reviews benchReview's reviews of mode with two harnesses in
// turn, so both see the same machine conditions, each expecting want
// violations, and reports each one's time per review and the ratio of
// the first's to the second's. In mode "admission" what a review reserved
// is released outside the timed region, so each bucket stays one entry big.
func alternate(b *testing.B, mode string, want int, first, second named) {
	var firstTime, secondTime time.Duration
	n := 0
	for b.Loop() {
		review, opts := benchReview(b, mode, n)
		secondTime += timeReview(b, second.evalCtx(), second.client, review, opts, want)
		firstTime += timeReview(b, first.evalCtx(), first.client, review, opts, want)
		if mode == "admission" {
			b.StopTimer()
			releaseBenchClaim(b, first.ledger, n)
			releaseBenchClaim(b, second.ledger, n)
			b.StartTimer()
		}
		n++
	}
	b.ReportMetric(float64(firstTime.Nanoseconds())/float64(n), first.name+"-ns/review")
	b.ReportMetric(float64(secondTime.Nanoseconds())/float64(n), second.name+"-ns/review")
	b.ReportMetric(float64(firstTime)/float64(secondTime), first.name+"/"+second.name)
}
