package webhooks_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/managertest"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

var organizationType = quotav1alpha1.ConsumerTypeRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization"}

func orgRef(name string) quotav1alpha1.ConsumerRef {
	return quotav1alpha1.ConsumerRef{APIGroup: organizationType.APIGroup, Kind: organizationType.Kind, Name: name}
}

func nsRef(name string) quotav1alpha1.ConsumerRef {
	return quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: name}
}

// tenantOf labels a namespace as belonging to an organization.
func tenantOf(org string) map[string]string {
	return map[string]string{quotav1alpha1.ConsumerLabelKey(organizationType.APIGroup, organizationType.Kind): org}
}

func newNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	if err := k8s.Create(ctx, builders.Namespace(name).Labels(labels).Obj()); err != nil {
		t.Fatal(err)
	}
}

// waitCondition waits for obj's condition of type to have status and
// reason for obj's current generation, and returns its message.
func waitCondition(t *testing.T, obj quotav1alpha1.ConditionGetter, typ string, status metav1.ConditionStatus, reason string) string {
	t.Helper()
	return testenv.WaitCondition(t, k8s, settle, obj, typ, status, reason)
}

// registration is an Allocation registration of rt consumed by consumer,
// claimed by ConfigMaps, split by dims.
func registration(name, rt string, consumer quotav1alpha1.ConsumerTypeRef, dims ...string) *builders.RegistrationWrapper {
	return builders.Registration(name, rt).Consumer(consumer).Type(quotav1alpha1.RegistrationTypeAllocation).
		BaseUnit("unit").Dimensions(dims...).ClaimingResources(quotav1alpha1.GroupKind{Kind: "ConfigMap"})
}

// newRegistration creates registration(name, rt, consumer, dims...) and
// waits for it to be Active.
func newRegistration(t *testing.T, name, rt string, consumer quotav1alpha1.ConsumerTypeRef, dims ...string) *quotav1alpha1.ResourceRegistration {
	t.Helper()
	reg := registration(name, rt, consumer, dims...).Obj()
	managertest.CreateActive(t, k8s, settle, reg, quotav1alpha1.ReasonRegistrationActive)
	return reg
}

// grantObject is a grant for c where c's buckets live.
func grantObject(name string, c quotav1alpha1.ConsumerRef, allowances ...quotav1alpha1.Allowance) *quotav1alpha1.ResourceGrant {
	return builders.Grant(name, quotav1alpha1.BucketNamespace(c, sysNS)).Consumer(c).Allowances(allowances...).Obj()
}

// newGrant creates a grant where its consumer's buckets live and waits for
// it to be Active.
func newGrant(t *testing.T, name string, c quotav1alpha1.ConsumerRef, allowances ...quotav1alpha1.Allowance) *quotav1alpha1.ResourceGrant {
	t.Helper()
	g := grantObject(name, c, allowances...)
	managertest.CreateActive(t, k8s, settle, g, quotav1alpha1.ReasonGrantActive)
	return g
}

func claimObject(ns, name string, c quotav1alpha1.ConsumerRef, reqs ...quotav1alpha1.ResourceRequest) *quotav1alpha1.ResourceClaim {
	return builders.Claim(name, ns).Consumer(c).Requests(reqs...).Obj()
}

func newClaim(t *testing.T, ns, name string, c quotav1alpha1.ConsumerRef, reqs ...quotav1alpha1.ResourceRequest) *quotav1alpha1.ResourceClaim {
	t.Helper()
	claim := claimObject(ns, name, c, reqs...)
	if err := k8s.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	return claim
}

// clientAs is a client that acts as user in group (and
// system:authenticated), subject to RBAC.
func clientAs(t *testing.T, user, group string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{group, "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
