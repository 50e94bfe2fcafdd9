package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// Issue 22's review item: a ClaimCreationPolicy's consumer is rendered from
// the object, which the tenant writes. Here it is read from a label, with
// the object's namespace as the default, so a tenant of team-a who labels a
// ConfigMap charge-to=team-b names team-b's quota. The rendered claim is
// judged as the claim webhook judges a ResourceClaim in team-a: denied at
// create and at update with the policy's and the consumer's names, and an
// object that predates the policy counts nothing for team-b in the
// observer. team-b's bucket holds exactly its own object throughout.
func TestAClaimPolicyCannotChargeAnotherTenantsConsumer(t *testing.T) {
	t.Parallel()
	const a, b, rt, policy = "team-a", "team-b", "e2e.quota/trust-configmaps", "e2e-trust-charge-to"
	ctx := context.Background()
	namespace(t, a, nil)
	namespace(t, b, nil)
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	consumerA := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: a}
	consumerB := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: b}
	grant(t, "trust-a", consumerA, rt, 5)
	grant(t, "trust-b", consumerB, rt, 5)

	chargedTo := func(ns, name, to string) *corev1.ConfigMap {
		cm := configMap(ns, name, nil)
		if to != "" {
			cm.Labels = map[string]string{"charge-to": to}
		}
		return cm
	}
	// Before the policy: team-b's own ConfigMap, and one in team-a that
	// will render team-b.
	create(t, chargedTo(b, "own", ""))
	create(t, chargedTo(a, "stray", b))

	claimPolicy(t, builders.ClaimPolicy(policy, "v1", "ConfigMap",
		quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: `{{ trigger.metadata.?labels["charge-to"].orValue(trigger.metadata.namespace) }}`}).
		Condition(`trigger.metadata.namespace in ["`+a+`", "`+b+`"]`).
		Request(rt, intstr.FromInt32(1)).Obj())

	// A tenant with nothing but the namespace admin role in team-a.
	create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "tenant-a-admin"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant-a"}}})
	tenant := impersonating(t, "tenant-a", nil)
	testenv.Eventually(t, 30*time.Second, "tenant-a may create ConfigMaps in team-a", func() error {
		err := tenant.Create(ctx, chargedTo(a, "mine", ""))
		if apierrors.IsForbidden(err) && !isQuotaDenial(err) {
			return err // RBAC: the binding is not in the authorizer's cache yet
		}
		if err != nil {
			return fmt.Errorf("stop: %w", err)
		}
		return nil
	})

	msg := `quota: ClaimCreationPolicy "` + policy + `": spec.target.resourceClaimTemplate.spec.consumerRef: Forbidden: ` +
		`a claim in namespace "` + a + `" may not claim the quota of namespace "` + b + `"`
	want := denial(policy, msg)
	err := tenant.Create(ctx, chargedTo(a, "theft", b))
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("create charging team-b: got %v\nwant %s", err, want)
	}
	// Relabelling its own ConfigMap is the same claim: denied alike.
	mine := &corev1.ConfigMap{}
	if err := tenant.Get(ctx, client.ObjectKey{Namespace: a, Name: "mine"}, mine); err != nil {
		t.Fatal(err)
	}
	mine.Labels = map[string]string{"charge-to": b}
	if err := tenant.Update(ctx, mine); !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("update charging team-b: got %v\nwant %s", err, want)
	}
	// Naming its own namespace is fine.
	if err := tenant.Create(ctx, chargedTo(a, "named", a)); err != nil {
		t.Fatalf("create charging team-a: %v", err)
	}

	// team-a counts mine and named; stray counts for nobody (the observer
	// evaluates the same Rego through the same builtin), and team-b only its
	// own ConfigMap, none of team-a's objects.
	waitBucket(t, consumerA, rt, 2, 0)
	waitBucket(t, consumerB, rt, 1, 0)
	// Gatekeeper's audit reports stray, with the same words.
	testenv.Eventually(t, 2*time.Minute, "audit reports stray", func() error {
		if n, msgs := auditViolationsOf(t, "QuotaClaimPolicy", policy); n != 1 || len(msgs) != 1 || msgs[0] != msg {
			return fmt.Errorf("%d violations %q", n, msgs)
		}
		return nil
	})
	st := bucket(t, consumerB, rt)
	if st.Allocated != 1 || st.Reserved != 0 || len(st.Reservations) != 0 {
		t.Fatalf("team-b's bucket: allocated %d reserved %d reservations %+v, want 1, 0, none", st.Allocated, st.Reserved, st.Reservations)
	}
	assertNamespaces(t, consumerB, rt, map[string]int64{b: 1})
	assertNamespaces(t, consumerA, rt, map[string]int64{a: 2})
}

// isQuotaDenial reports whether err is a webhook's denial, not RBAC's.
func isQuotaDenial(err error) bool {
	return strings.HasPrefix(err.Error(), "admission webhook ")
}
