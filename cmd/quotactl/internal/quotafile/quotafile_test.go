package quotafile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/cmd/quotactl/internal/quotafile"
	"github.com/quotakeeper/quotakeeper/internal/celpolicy"
	"github.com/quotakeeper/quotakeeper/internal/claimpolicies"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

const registration = `apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceRegistration
metadata:
  name: projects
spec:
  consumerTypeRef:
    apiGroup: resourcemanager.miloapis.com
    kind: Organization
  type: Entity
  resourceType: resourcemanager.miloapis.com/projects
  baseUnit: projects
  claimingResources:
    - apiGroup: resourcemanager.miloapis.com
      kind: Project
`

const grant = `apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceGrant
metadata:
  name: acme
  namespace: quotakeeper-system
spec:
  consumerRef:
    apiGroup: resourcemanager.miloapis.com
    kind: Organization
    name: acme
  allowances:
    - resourceType: resourcemanager.miloapis.com/projects
      buckets:
        - amount: 10
        - amount: 5
`

func TestLedgerHoldsTheGrantsRead(t *testing.T) {
	fsys := fstest.MapFS{"q.yaml": {Data: []byte(registration + "---\n" + grant)}}
	var s quotafile.Set
	if err := s.Read(fsys, "q.yaml"); err != nil {
		t.Fatal(err)
	}
	l, err := s.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	acme := ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}
	u, err := l.Usage(context.Background(), ledger.NewBucketKey(acme, "resourcemanager.miloapis.com/projects", nil))
	if err != nil {
		t.Fatal(err)
	}
	if u != (ledger.Usage{Limit: 15, Available: 15}) {
		t.Errorf("usage %+v, want limit 15", u)
	}
}

const claimPolicy = `apiVersion: quota.miloapis.com/v1alpha1
kind: ClaimCreationPolicy
metadata:
  name: configmaps
spec:
  trigger:
    resource:
      apiVersion: v1
      kind: ConfigMap
  target:
    resourceClaimTemplate:
      metadata:
        name: '{{ trigger.metadata.name }}-claim'
      spec:
        consumerRef:
          kind: Namespace
          name: '{{ trigger.metadata.namespace }}'
        requests:
          - resourceType: core/configmaps
            amount: 1
`

// A policy read from a file is in force: the set renders its claim.
func TestClaimPolicies(t *testing.T) {
	var s quotafile.Set
	if err := s.Read(fstest.MapFS{"q.yaml": {Data: []byte(claimPolicy)}}, "q.yaml"); err != nil {
		t.Fatal(err)
	}
	in := celpolicy.ClaimInput{Trigger: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cm-1", "namespace": "team-a"}}}
	got, err := s.ClaimPolicies().Claim(context.Background(), "configmaps", 0, in, claimpolicies.Namespace{Name: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	want := builders.Claim("cm-1-claim", "").Consumer(v1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-a"}).
		Request("core/configmaps", 1, nil).Obj()
	if got == nil || !equality.Semantic.DeepEqual(got.ObjectMeta, want.ObjectMeta) || !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
		t.Errorf("claim:\n got %+v\nwant %+v", got, want)
	}
}

func TestReadRejectsWhatTheAPIServerWould(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"unknown field", registration + "  baseUnits: x\n",
			`q.yaml: document 1: ResourceRegistration projects: strict decoding error: unknown field "spec.baseUnits"`},
		{"another kind", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
			"q.yaml: document 1: v1 ConfigMap: want apiVersion quota.miloapis.com/v1alpha1"},
		{"another quota kind", "apiVersion: quota.miloapis.com/v1alpha1\nkind: ResourceClaim\nmetadata:\n  name: x\n",
			"q.yaml: document 1: kind ResourceClaim: want ResourceRegistration, ResourceGrant or ClaimCreationPolicy"},
		{"a policy the webhook would reject", strings.Replace(claimPolicy, "amount: 1", "amount: '{{ invalid_function() }}'", 1),
			`q.yaml: document 1: ClaimCreationPolicy configmaps: spec.target.resourceClaimTemplate.spec.requests[0].amount: Invalid value: "{{ invalid_function() }}": ` +
				"compilation failed in {{ invalid_function() }}: 1:17: undeclared reference to 'invalid_function' (in container '')"},
		{"a policy read twice", claimPolicy + "---\n" + claimPolicy, "q.yaml: document 2: ClaimCreationPolicy configmaps: read twice"},
		{"registered twice", registration + "---\n" + registration,
			"q.yaml: document 2: ResourceRegistration projects: resource type resourcemanager.miloapis.com/projects is already registered by projects"},
		{"empty", "# nothing\n", "q.yaml: no objects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s quotafile.Set
			err := s.Read(fstest.MapFS{"q.yaml": {Data: []byte(tc.data)}}, "q.yaml")
			if err == nil || err.Error() != tc.want {
				t.Errorf("error:\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestGrantsMustFitTheRegistrations(t *testing.T) {
	// The registration says Projects consume the resource type; the grant gives it to an Organization.
	reg := strings.Replace(registration, "kind: Organization", "kind: Project", 1)
	var s quotafile.Set
	if err := s.Read(fstest.MapFS{"q.yaml": {Data: []byte(reg + "---\n" + grant)}}, "q.yaml"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Ledger()
	want := `q.yaml: ResourceGrant quotakeeper-system/acme: spec.consumerRef: Invalid value: "resourcemanager.miloapis.com/Organization": ` +
		`resource type "resourcemanager.miloapis.com/projects" is consumed by resourcemanager.miloapis.com/Project (ResourceRegistration "projects")`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n got %v\nwant %s", err, want)
	}
}

const nsConfigMaps = `apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceRegistration
metadata:
  name: configmaps
spec:
  consumerTypeRef:
    kind: Namespace
  type: Entity
  resourceType: core/configmaps
  baseUnit: configmaps
  claimingResources:
    - kind: ConfigMap
---
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceGrant
metadata:
  name: acme-to-hand-out
  namespace: quotakeeper-system
spec:
  consumerRef:
    apiGroup: resourcemanager.miloapis.com
    kind: Organization
    name: acme
  allowances:
    - resourceType: delegated/core/configmaps
      buckets:
        - amount: 10
`

func handOut(ns string, amount int) string {
	return strings.NewReplacer("NS", ns, "AMOUNT", fmt.Sprint(amount)).Replace(`---
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceGrant
metadata:
  name: quota
  namespace: NS
spec:
  consumerRef:
    kind: Namespace
    name: NS
  delegatedFrom:
    consumerRef:
      apiGroup: resourcemanager.miloapis.com
      kind: Organization
      name: acme
  allowances:
    - resourceType: core/configmaps
      buckets:
        - amount: AMOUNT
`)
}

// Quota files describe a cluster the webhooks admitted: hand-outs past a
// cap are refused with the webhook's message; within it, they are the
// children's limits.
func TestHandOutsMustFitTheirCap(t *testing.T) {
	var within quotafile.Set
	if err := within.Read(fstest.MapFS{"q.yaml": {Data: []byte(nsConfigMaps + handOut("team-a", 6) + handOut("team-b", 4))}}, "q.yaml"); err != nil {
		t.Fatal(err)
	}
	l, err := within.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	u, err := l.Usage(context.Background(), ledger.NewBucketKey(ledger.Consumer{Kind: "Namespace", Name: "team-a"}, "core/configmaps", nil))
	if err != nil || u.Limit != 6 {
		t.Fatalf("team-a's limit %d (%v), want 6", u.Limit, err)
	}

	var past quotafile.Set
	if err := past.Read(fstest.MapFS{"q.yaml": {Data: []byte(nsConfigMaps + handOut("team-a", 6) + handOut("team-b", 5))}}, "q.yaml"); err != nil {
		t.Fatal(err)
	}
	_, err = past.Ledger()
	want := `q.yaml: ResourceGrant team-b/quota: cap exceeded: Organization acme's cap of core/configmaps is 10, handed out 6 ` +
		`(6 to Namespace team-a (team-a/quota)), in flight 0, available 4: cannot hand out 5 more to Namespace team-b`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n got %v\nwant %s", err, want)
	}
}
