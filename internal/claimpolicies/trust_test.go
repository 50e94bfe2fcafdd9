package claimpolicies_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/celpolicy"
	"github.com/quotakeeper/quotakeeper/internal/claimpolicies"
	"github.com/quotakeeper/quotakeeper/internal/validation"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

const orgLabel = "resourcemanager.miloapis.com/organization"

// chargePolicy renders its consumer from a label the tenant writes on the
// object: the case the check exists for.
func chargePolicy(consumer quotav1alpha1.ConsumerRefTemplate) *builders.ClaimPolicyWrapper {
	return builders.ClaimPolicy("charge", "v1", "ConfigMap", consumer).Request("core/configmaps", intstr.FromInt32(1))
}

var (
	namespaceFromLabel = quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: `{{ trigger.metadata.labels.charge }}`}
	orgFromLabel       = quotav1alpha1.ConsumerRefTemplate{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: `{{ trigger.metadata.labels.charge }}`}
)

// labelled is a ConfigMap in namespace ns labelled charge=charge.
func labelled(ns, charge string) celpolicy.ClaimInput {
	in := input("v1", "ConfigMap")
	in.Trigger["metadata"] = map[string]any{"name": "cm", "namespace": ns, "labels": map[string]any{"charge": charge}}
	return in
}

func TestARenderedClaimIsJudgedAsAResourceClaimInTheObjectsNamespace(t *testing.T) {
	acme := claimpolicies.Namespace{Name: "team-a", Labels: map[string]string{orgLabel: "acme"}, Known: true}
	for _, tc := range []struct {
		name   string
		policy *quotav1alpha1.ClaimCreationPolicy
		in     celpolicy.ClaimInput
		ns     claimpolicies.Namespace
		sysNS  string
		want   string // consumer rendered, or the error
		err    string
	}{
		{name: "its own namespace", policy: chargePolicy(namespaceFromLabel).Obj(), in: labelled("team-a", "team-a"), ns: teamA,
			want: "Namespace team-a"},
		{name: "another tenant's namespace", policy: chargePolicy(namespaceFromLabel).Obj(), in: labelled("team-a", "team-b"), ns: teamA,
			err: `ClaimCreationPolicy "charge": spec.target.resourceClaimTemplate.spec.consumerRef: Forbidden: a claim in namespace "team-a" may not claim the quota of namespace "team-b"`},
		{name: "the organization the namespace belongs to", policy: chargePolicy(orgFromLabel).Obj(), in: labelled("team-a", "acme"), ns: acme,
			want: "Organization acme"},
		{name: "another organization", policy: chargePolicy(orgFromLabel).Obj(), in: labelled("team-a", "globex"), ns: acme,
			err: `ClaimCreationPolicy "charge": spec.target.resourceClaimTemplate.spec.consumerRef: Forbidden: namespace "team-a" does not belong to resourcemanager.miloapis.com/Organization "globex": it needs the label resourcemanager.miloapis.com/organization=globex`},
		{name: "a namespace whose labels are unknown", policy: chargePolicy(orgFromLabel).Obj(), in: labelled("team-a", "acme"),
			ns:  claimpolicies.Namespace{Name: "team-a"},
			err: `ClaimCreationPolicy "charge": spec.target.resourceClaimTemplate.spec.consumerRef: Forbidden: namespace "team-a" does not belong to resourcemanager.miloapis.com/Organization "acme": it needs the label resourcemanager.miloapis.com/organization=acme (the labels of namespace "team-a" are unknown here: sync v1 Namespace)`},
		{name: "a namespace consumer needs no labels", policy: chargePolicy(namespaceFromLabel).Obj(), in: labelled("team-a", "team-a"),
			ns: claimpolicies.Namespace{Name: "team-a"}, want: "Namespace team-a"},
		{name: "the system namespace holds an organization's buckets", policy: chargePolicy(orgFromLabel).Obj(),
			in: labelled("platform-quota", "acme"), ns: claimpolicies.Namespace{Name: "platform-quota", Known: true}, sysNS: "platform-quota",
			want: "Organization acme"},
		{name: "the default system namespace is not the configured one", policy: chargePolicy(orgFromLabel).Obj(),
			in: labelled(quotav1alpha1.DefaultSystemNamespace, "acme"), ns: claimpolicies.Namespace{Name: quotav1alpha1.DefaultSystemNamespace, Known: true}, sysNS: "platform-quota",
			err: `ClaimCreationPolicy "charge": spec.target.resourceClaimTemplate.spec.consumerRef: Forbidden: namespace "` + quotav1alpha1.DefaultSystemNamespace + `" does not belong to resourcemanager.miloapis.com/Organization "acme": it needs the label resourcemanager.miloapis.com/organization=acme`},
		{name: "a claim rendered into another namespace", policy: chargePolicy(namespaceFromLabel).TargetNamespace(`{{ trigger.metadata.labels.charge }}`).Obj(),
			in: labelled("team-a", "team-b"), ns: teamA,
			err: `ClaimCreationPolicy "charge": spec.target.resourceClaimTemplate.metadata.namespace: Forbidden: rendered "team-b" for an object in namespace "team-a": a policy's claim is made in its object's namespace`},
		{name: "a claim rendered into its own namespace", policy: chargePolicy(namespaceFromLabel).TargetNamespace(`{{ trigger.metadata.namespace }}`).Obj(),
			in: labelled("team-a", "team-a"), ns: teamA, want: "Namespace team-a"},
		{name: "a cluster-scoped object is in no tenant's namespace", policy: chargePolicy(orgFromLabel).Obj(),
			in: labelled("", "globex"), ns: claimpolicies.Namespace{}, want: "Organization globex"},
		{name: "a Namespace by its own labels", policy: builders.ClaimPolicy("charge", "v1", "Namespace", orgFromLabel).Request("core/namespaces", intstr.FromInt32(1)).Obj(),
			in: func() celpolicy.ClaimInput {
				in := input("v1", "Namespace")
				in.Trigger["metadata"] = map[string]any{"name": "team-c", "labels": map[string]any{"charge": "globex", orgLabel: "acme"}}
				return in
			}(), ns: claimpolicies.Namespace{Name: "team-c", Labels: map[string]string{"charge": "globex", orgLabel: "acme"}, Known: true},
			err: `ClaimCreationPolicy "charge": spec.target.resourceClaimTemplate.spec.consumerRef: Forbidden: namespace "team-c" does not belong to resourcemanager.miloapis.com/Organization "globex": it needs the label resourcemanager.miloapis.com/organization=globex`},
		{name: "a policy that does not apply is not judged", policy: chargePolicy(namespaceFromLabel).Condition(`trigger.metadata.name == "other"`).Obj(),
			in: labelled("team-a", "team-b"), ns: teamA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := claimpolicies.NewSet(tc.policy)
			if tc.sysNS != "" {
				s.SetSystemNamespace(tc.sysNS)
			}
			got, err := s.Claim(ctx, "charge", 0, tc.in, tc.ns)
			if tc.err != "" {
				if _, ok := errors.AsType[*claimpolicies.Error](err); !ok || err.Error() != tc.err {
					t.Fatalf("got  %v (%T)\nwant %s", err, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("claimed %v, want nothing", got.Spec.ConsumerRef)
			case tc.want == "":
			case got == nil:
				t.Fatalf("claimed nothing, want %s", tc.want)
			case got.Spec.ConsumerRef.Kind+" "+got.Spec.ConsumerRef.Name != tc.want:
				t.Errorf("claimed %s %s, want %s", got.Spec.ConsumerRef.Kind, got.Spec.ConsumerRef.Name, tc.want)
			}
		})
	}
}

// The rendered claim and a ResourceClaim an owning service creates are held
// to one rule in one place: for the same namespace and consumer, the claim
// webhook's verdict and the policy's are the same words.
func TestARenderedClaimFailsWithTheClaimWebhooksVerdict(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{orgLabel: "acme"}}}
	for _, charge := range []struct {
		template quotav1alpha1.ConsumerRefTemplate
		consumer quotav1alpha1.ConsumerRef
	}{
		{namespaceFromLabel, quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-b"}},
		{orgFromLabel, quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "team-b"}},
	} {
		_, err := claimpolicies.NewSet(chargePolicy(charge.template).Obj()).
			Claim(ctx, "charge", 0, labelled("team-a", "team-b"), claimpolicies.Namespace{Name: "team-a", Labels: ns.Labels, Known: true})
		policyErr, ok := errors.AsType[*claimpolicies.Error](err)
		if !ok {
			t.Fatalf("%s: got %v, want a refusal", charge.consumer.Kind, err)
		}
		claim := builders.Claim("c", "team-a").Consumer(charge.consumer).Obj()
		verdict := validation.ValidateClaim(claim, &validation.Catalog{}, ns, quotav1alpha1.DefaultSystemNamespace)
		if len(verdict.Errors) == 0 || verdict.Errors[0].Field != "spec.consumerRef" {
			t.Fatalf("%s: the claim webhook's verdict: %v", charge.consumer.Kind, verdict.Errors)
		}
		ferr, ok := errors.AsType[*field.Error](policyErr.Err)
		if !ok {
			t.Fatalf("%s: got %T, want a *field.Error", charge.consumer.Kind, policyErr.Err)
		}
		if got, want := ferr.ErrorBody(), verdict.Errors[0].ErrorBody(); got != want {
			t.Errorf("%s: policy %s\nwebhook %s", charge.consumer.Kind, got, want)
		}
	}
}
