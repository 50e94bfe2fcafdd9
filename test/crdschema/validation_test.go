package crdschema_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// These tests run against a real kube-apiserver: the validation they check
// is the schema and CEL rules in config/crd, enforced by the server.

var (
	k8s    client.Client
	config *rest.Config
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping API validation suite in -short mode: it needs a control plane")
		os.Exit(0)
	}
	env, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s, config = env.Client, env.Config
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

func validRegistration(name string) *quotav1alpha1.ResourceRegistration {
	return &quotav1alpha1.ResourceRegistration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: quotav1alpha1.ResourceRegistrationSpec{
			ConsumerTypeRef:      quotav1alpha1.ConsumerTypeRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization"},
			Type:                 quotav1alpha1.RegistrationTypeEntity,
			ResourceType:         "resourcemanager.miloapis.com/projects",
			Description:          "Projects per organization",
			BaseUnit:             "project",
			DisplayUnit:          "projects",
			UnitConversionFactor: 1,
			ClaimingResources:    []quotav1alpha1.GroupKind{{APIGroup: "resourcemanager.miloapis.com", Kind: "Project"}},
		},
	}
}

func validClaim(name string) *quotav1alpha1.ResourceClaim {
	return builders.Claim(name, "default").
		Consumer(quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}).
		Request("resourcemanager.miloapis.com/projects", 1, nil).Obj()
}

// requireInvalid asserts that err is a 422 Invalid whose causes include one
// for field whose message contains want.
func requireInvalid(t *testing.T, err error, field, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected the server to reject %s (%q), it accepted", field, want)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("expected Invalid, got %v", err)
	}
	var status apierrors.APIStatus
	if !asStatus(err, &status) || status.Status().Details == nil {
		t.Fatalf("no status details in %v", err)
	}
	var seen []string
	for _, cause := range status.Status().Details.Causes {
		seen = append(seen, cause.Field+": "+cause.Message)
		if cause.Field == field && strings.Contains(cause.Message, want) {
			return
		}
	}
	t.Fatalf("no cause for %s containing %q; causes:\n  %s", field, want, strings.Join(seen, "\n  "))
}

func asStatus(err error, target *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*target = s
	}
	return ok
}

func TestRegistrationValidAccepted(t *testing.T) {
	ctx := context.Background()
	reg := validRegistration("valid")
	if err := k8s.Create(ctx, reg); err != nil {
		t.Fatalf("valid registration rejected: %v", err)
	}
	got := &quotav1alpha1.ResourceRegistration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "valid"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.UnitConversionFactor != 1 || got.Spec.ClaimingResources[0].Kind != "Project" {
		t.Fatalf("stored spec differs: %+v", got.Spec)
	}
}

func TestRegistrationDefaultsFactorAndCoreGroup(t *testing.T) {
	ctx := context.Background()
	reg := validRegistration("defaults")
	reg.Spec.UnitConversionFactor = 0 // omitted on the wire: the schema default applies
	reg.Spec.ClaimingResources = []quotav1alpha1.GroupKind{{Kind: "ConfigMap"}}
	if err := k8s.Create(ctx, reg); err != nil {
		t.Fatalf("registration without factor rejected: %v", err)
	}
	if reg.Spec.UnitConversionFactor != 1 {
		t.Fatalf("unitConversionFactor defaulted to %d, want 1", reg.Spec.UnitConversionFactor)
	}
}

func TestRegistrationRejected(t *testing.T) {
	twentyOne := make([]quotav1alpha1.GroupKind, 21)
	for i := range twentyOne {
		twentyOne[i] = quotav1alpha1.GroupKind{APIGroup: "example.com", Kind: fmt.Sprintf("Kind%d", i)}
	}
	cases := []struct {
		name   string
		mutate func(*quotav1alpha1.ResourceRegistration)
		field  string
		want   string
	}{
		{"bad type enum", func(r *quotav1alpha1.ResourceRegistration) { r.Spec.Type = "Quantity" },
			"spec.type", `Unsupported value: "Quantity": supported values: "Entity", "Allocation", "Feature"`},
		{"factor negative", func(r *quotav1alpha1.ResourceRegistration) { r.Spec.UnitConversionFactor = -5 },
			"spec.unitConversionFactor", "should be greater than or equal to 1"},
		{"21 claimingResources", func(r *quotav1alpha1.ResourceRegistration) { r.Spec.ClaimingResources = twentyOne },
			"spec.claimingResources", "must have at most 20 items"},
		{"no claimingResources", func(r *quotav1alpha1.ResourceRegistration) {
			r.Spec.ClaimingResources = []quotav1alpha1.GroupKind{}
		}, "spec.claimingResources", "should have at least 1 items"},
		{"duplicate claimingResources", func(r *quotav1alpha1.ResourceRegistration) {
			r.Spec.ClaimingResources = []quotav1alpha1.GroupKind{{Kind: "ConfigMap"}, {Kind: "ConfigMap"}}
		}, "spec.claimingResources[1]", "Duplicate value"},
		{"empty resourceType", func(r *quotav1alpha1.ResourceRegistration) { r.Spec.ResourceType = "" },
			"spec.resourceType", "should be at least 1 chars long"},
		{"254-char resourceType", func(r *quotav1alpha1.ResourceRegistration) { r.Spec.ResourceType = strings.Repeat("r", 254) },
			"spec.resourceType", "may not be more than 253 bytes"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := validRegistration(fmt.Sprintf("rejected-%d", i))
			tc.mutate(reg)
			err := k8s.Create(context.Background(), reg)
			requireInvalid(t, err, tc.field, tc.want)
		})
	}
}

// A Go client omits a zero factor (omitempty) and the schema defaults it to 1,
// so an explicit zero, as a YAML author would write it, is sent unstructured.
func TestRegistrationFactorZeroRejected(t *testing.T) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(testenv.GVK("ResourceRegistration"))
	obj.SetName("factor-zero")
	reg := validRegistration("factor-zero")
	spec := map[string]any{
		"consumerTypeRef":      map[string]any{"apiGroup": reg.Spec.ConsumerTypeRef.APIGroup, "kind": reg.Spec.ConsumerTypeRef.Kind},
		"type":                 "Entity",
		"resourceType":         reg.Spec.ResourceType,
		"baseUnit":             "project",
		"unitConversionFactor": int64(0),
		"claimingResources":    []any{map[string]any{"apiGroup": "resourcemanager.miloapis.com", "kind": "Project"}},
	}
	if err := unstructured.SetNestedField(obj.Object, spec, "spec"); err != nil {
		t.Fatal(err)
	}
	requireInvalid(t, k8s.Create(context.Background(), obj), "spec.unitConversionFactor", "should be greater than or equal to 1")
}

func TestRegistrationImmutableFields(t *testing.T) {
	ctx := context.Background()
	reg := validRegistration("immutable")
	if err := k8s.Create(ctx, reg); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		field  string
		mutate func(*quotav1alpha1.ResourceRegistration)
	}{
		{"spec.type", func(r *quotav1alpha1.ResourceRegistration) { r.Spec.Type = quotav1alpha1.RegistrationTypeAllocation }},
		{"spec.resourceType", func(r *quotav1alpha1.ResourceRegistration) {
			r.Spec.ResourceType = "resourcemanager.miloapis.com/other"
		}},
		{"spec.consumerTypeRef", func(r *quotav1alpha1.ResourceRegistration) { r.Spec.ConsumerTypeRef.Kind = "Project" }},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			current := &quotav1alpha1.ResourceRegistration{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(reg), current); err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(current.DeepCopy())
			tc.mutate(current)
			err := k8s.Patch(ctx, current, patch)
			requireInvalid(t, err, tc.field, tc.field+" is immutable")
		})
	}
}

func TestRegistrationMutableFields(t *testing.T) {
	ctx := context.Background()
	reg := validRegistration("mutable")
	if err := k8s.Create(ctx, reg); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(reg.DeepCopy())
	reg.Spec.Description = "Projects an organization may hold"
	reg.Spec.BaseUnit = "projects"
	reg.Spec.DisplayUnit = "project(s)"
	reg.Spec.ClaimingResources = append(reg.Spec.ClaimingResources, quotav1alpha1.GroupKind{Kind: "ConfigMap"})
	if err := k8s.Patch(ctx, reg, patch); err != nil {
		t.Fatalf("patching mutable fields rejected: %v", err)
	}
	got := &quotav1alpha1.ResourceRegistration{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(reg), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Description != "Projects an organization may hold" || got.Spec.BaseUnit != "projects" ||
		got.Spec.DisplayUnit != "project(s)" || len(got.Spec.ClaimingResources) != 2 {
		t.Fatalf("patch not stored: %+v", got.Spec)
	}
}

func TestClaimRejected(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*quotav1alpha1.ResourceClaim)
		field  string
		want   string
	}{
		{"amount zero", func(c *quotav1alpha1.ResourceClaim) { c.Spec.Requests[0].Amount = 0 },
			"spec.requests[0].amount", "should be greater than or equal to 1"},
		{"amount negative", func(c *quotav1alpha1.ResourceClaim) { c.Spec.Requests[0].Amount = -1 },
			"spec.requests[0].amount", "should be greater than or equal to 1"},
		{"duplicate request resourceTypes", func(c *quotav1alpha1.ResourceClaim) {
			c.Spec.Requests = append(c.Spec.Requests, quotav1alpha1.ResourceRequest{ResourceType: "resourcemanager.miloapis.com/projects", Amount: 2})
		}, "spec.requests[1]", "Duplicate value"},
		{"no requests", func(c *quotav1alpha1.ResourceClaim) { c.Spec.Requests = []quotav1alpha1.ResourceRequest{} },
			"spec.requests", "should have at least 1 items"},
		{"21 requests", func(c *quotav1alpha1.ResourceClaim) {
			c.Spec.Requests = nil
			for i := 0; i < 21; i++ {
				c.Spec.Requests = append(c.Spec.Requests, quotav1alpha1.ResourceRequest{ResourceType: fmt.Sprintf("example.com/r%d", i), Amount: 1})
			}
		}, "spec.requests", "must have at most 20 items"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			claim := validClaim(fmt.Sprintf("rejected-%d", i))
			tc.mutate(claim)
			requireInvalid(t, k8s.Create(context.Background(), claim), tc.field, tc.want)
		})
	}
}

func TestClaimSpecImmutable(t *testing.T) {
	ctx := context.Background()
	claim := validClaim("immutable")
	if err := k8s.Create(ctx, claim); err != nil {
		t.Fatalf("valid claim rejected: %v", err)
	}
	patch := client.MergeFrom(claim.DeepCopy())
	claim.Spec.Requests[0].Amount = 5
	requireInvalid(t, k8s.Patch(ctx, claim, patch), "spec", "spec is immutable")
}

func TestGrantAmounts(t *testing.T) {
	ctx := context.Background()
	grant := func(name string, amount int64) *quotav1alpha1.ResourceGrant {
		return builders.Grant(name, "default").Consumer(quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "default"}).
			Allowance("core/configmaps", amount).Obj()
	}
	if err := k8s.Create(ctx, grant("zero", 0)); err != nil {
		t.Fatalf("grant of 0 rejected: %v", err)
	}
	requireInvalid(t, k8s.Create(ctx, grant("negative", -1)), "spec.allowances[0].buckets[0].amount", "should be greater than or equal to 0")
}

// Seed 002's policy examples are valid objects (its claim example's
// '{{.parentOrg}}' is refused by the policy webhook, which this suite does
// not run; the schema admits it).
func TestSeedPolicyExamplesAccepted(t *testing.T) {
	ctx := context.Background()
	for _, file := range []string{"seed-002-grant-policy.yaml", "seed-002-claim-policy.yaml"} {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "internal", "celpolicy", "testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	var p quotav1alpha1.GrantCreationPolicy
	if err := k8s.Get(ctx, client.ObjectKey{Name: "organization-project-quota"}, &p); err != nil {
		t.Fatal(err)
	}
	if b := p.Spec.Target.ResourceGrantTemplate.Spec.Allowances[0].Buckets[0]; b.Amount != intstr.FromInt32(50) {
		t.Fatalf("amount %#v, want the integer 50", b.Amount)
	}
}

// A GrantCreationPolicy's amount is an integer or a string (a quantity or a
// template); nothing else.
func TestPolicyAmountIsIntOrString(t *testing.T) {
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`
apiVersion: quota.miloapis.com/v1alpha1
kind: GrantCreationPolicy
metadata: {name: amount-list}
spec:
  trigger: {resource: {apiVersion: v1, kind: Namespace}}
  target:
    resourceGrantTemplate:
      spec:
        consumerRef: {kind: Namespace, name: '{{trigger.metadata.name}}'}
        allowances:
        - resourceType: core/configmaps
          buckets: [{amount: [1]}]
`), &obj.Object); err != nil {
		t.Fatal(err)
	}
	requireInvalid(t, k8s.Create(context.Background(), obj), "spec.target.resourceGrantTemplate.spec.allowances[0].buckets[0].amount", "in body must be of type integer: \"array\"")
}
