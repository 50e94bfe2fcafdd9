package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// Gatekeeper's audit reports a consumer over its quota, on each of its
// objects, once its limit is lowered below what it holds; while every bucket
// is within its limit it reports nothing (the plugin's over-limit index says
// so without reading the objects' buckets).
func TestAuditReportsConsumersOverTheirLimit(t *testing.T) {
	t.Parallel()
	const ns, rt, name = "e2e-audit", "e2e.quota/audit-configmaps", "e2e-audit"
	namespace(t, ns, nil)
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	grant(t, "configmaps", consumer, rt, 3)
	quotaEntity(t, name, []string{ns}, map[string]any{"resourceType": rt})
	mustAdmit(t, ns, "a-1")
	mustAdmit(t, ns, "a-2")
	waitBucket(t, consumer, rt, 2, 0)

	waitAudit(t, "QuotaEntity", name, time.Now())
	if n, msgs := auditViolations(t, name); n != 0 {
		t.Fatalf("within the limit: %d violations %q", n, msgs)
	}

	// Lower the limit to 1: the bucket keeps what it holds, and is over.
	g := &quotav1alpha1.ResourceGrant{}
	key := client.ObjectKey{Namespace: quotav1alpha1.BucketNamespace(consumer, quotav1alpha1.DefaultSystemNamespace), Name: "configmaps"}
	if err := cluster.Client.Get(context.Background(), key, g); err != nil {
		t.Fatal(err)
	}
	g.Spec.Allowances[0].Buckets[0].Amount = 1
	if err := cluster.Client.Update(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the bucket's limit lowered to 1", func() error {
		if st := bucket(t, consumer, rt); st.Limit != 1 {
			return fmt.Errorf("limit %d", st.Limit)
		}
		return nil
	})
	want := "Namespace e2e-audit is over its quota of e2e.quota/audit-configmaps: allocated 2, reserved 0, limit 1"
	testenv.Eventually(t, time.Minute, "audit reports the consumer over its limit on both objects", func() error {
		n, msgs := auditViolations(t, name)
		if n != 2 || len(msgs) != 2 || msgs[0] != want || msgs[1] != want {
			return fmt.Errorf("%d violations %q", n, msgs)
		}
		return nil
	})
}

// auditViolations is the QuotaEntity constraint's last audit: its total and
// the messages Gatekeeper kept.
func auditViolations(t *testing.T, name string) (int64, []string) {
	t.Helper()
	return auditViolationsOf(t, "QuotaEntity", name)
}

// auditViolationsOf is auditViolations for a constraint of kind.
func auditViolationsOf(t *testing.T, kind, name string) (int64, []string) {
	t.Helper()
	c := &unstructured.Unstructured{}
	c.SetAPIVersion("constraints.gatekeeper.sh/v1beta1")
	c.SetKind(kind)
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: name}, c); err != nil {
		t.Fatal(err)
	}
	n, _, _ := unstructured.NestedInt64(c.Object, "status", "totalViolations")
	vs, _, _ := unstructured.NestedSlice(c.Object, "status", "violations")
	var msgs []string
	for _, v := range vs {
		if m, ok := v.(map[string]any)["message"].(string); ok {
			msgs = append(msgs, m)
		}
	}
	return n, msgs
}
