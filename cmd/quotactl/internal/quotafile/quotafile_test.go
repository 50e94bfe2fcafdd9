package quotafile_test

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/quotakeeper/quotakeeper/cmd/quotactl/internal/quotafile"
	"github.com/quotakeeper/quotakeeper/ledger"
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

func TestReadRejectsWhatTheAPIServerWould(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"unknown field", registration + "  baseUnits: x\n",
			`q.yaml: document 1: ResourceRegistration projects: strict decoding error: unknown field "spec.baseUnits"`},
		{"another kind", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
			"q.yaml: document 1: v1 ConfigMap: want apiVersion quota.miloapis.com/v1alpha1"},
		{"another quota kind", "apiVersion: quota.miloapis.com/v1alpha1\nkind: ResourceClaim\nmetadata:\n  name: x\n",
			"q.yaml: document 1: kind ResourceClaim: want ResourceRegistration or ResourceGrant"},
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
