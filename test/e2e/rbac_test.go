package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/dynwatch"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// The manager and every Gatekeeper replica run as their shipped
// ServiceAccounts, so RBAC decides what they may do: the API server says
// who each kubeconfig is, each process is started with its own, and the
// manager may not read Secrets.
func TestProcessesRunAsTheirServiceAccounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	check := func(p *localcluster.Process, kubeconfig string, sa localcluster.ServiceAccount) *kubernetes.Clientset {
		t.Helper()
		if !slices.Contains(p.Args, "--kubeconfig="+kubeconfig) {
			t.Fatalf("%s runs with %v, not --kubeconfig=%s", p.Name, p.Args, kubeconfig)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := review.Status.UserInfo
		if want := slices.Sorted(slices.Values(sa.Groups())); got.Username != sa.UserName() || !slices.Equal(slices.Sorted(slices.Values(got.Groups)), want) {
			t.Fatalf("%s is %s %v, want %s %v", p.Name, got.Username, got.Groups, sa.UserName(), sa.Groups())
		}
		return cs
	}
	manager := check(cluster.Manager, cluster.ManagerKubeconfig, localcluster.ManagerServiceAccount)
	for _, gk := range cluster.Gatekeepers {
		check(gk, cluster.GatekeeperKubeconfig, localcluster.GatekeeperServiceAccount)
	}
	for _, tc := range []struct {
		verb, resource, namespace string
		allowed                   bool
	}{
		{"list", "secrets", "", false},
		{"get", "secrets", "default", false},
		{"list", "configmaps", "", true},                               // through quotakeeper-manager-counted-kinds
		{"get", "secrets", quotav1alpha1.DefaultSystemNamespace, true}, // its webhook certificate
	} {
		r, err := manager.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: tc.verb, Resource: tc.resource, Namespace: tc.namespace,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != tc.allowed {
			t.Errorf("manager %s %s in %q: allowed %v, want %v (%s)", tc.verb, tc.resource, tc.namespace, r.Status.Allowed, tc.allowed, r.Status.Reason)
		}
	}
}

// A constraint that counts a kind the manager may not read: the manager says
// so on the constraint, naming the kind and the role to add, goes on
// counting the other kinds, and does not
// write the buckets of its resource type from a view without that kind (the
// admitted object stays a reservation, not folded and not expired). Once a
// ClusterRole labelled to join quotakeeper-manager-counted-kinds grants the
// kind, the object is counted. Not parallel: until the role is granted,
// every namespace relabel in the cluster fails closed (the consumer-label
// guard cannot list the kind to count what the namespace would bring).
func TestManagerCountsAKindOnlyOnceRBACLetsItRead(t *testing.T) {
	ctx := context.Background()
	const ns, rt = "e2e-rbac-kind", "core/serviceaccounts"
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	namespace(t, ns, nil)
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer, quotav1alpha1.GroupKind{Kind: "ServiceAccount"})
	grant(t, "e2e-rbac-kind", consumer, rt, 5)
	quotaConstraint(t, "QuotaEntity", "e2e-rbac-kind", map[string]any{
		"match": map[string]any{
			"kinds":      []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"ServiceAccount"}}},
			"namespaces": []any{ns},
		},
		"parameters": map[string]any{"resourceType": rt},
	})

	testenv.Eventually(t, time.Minute, "an event on the constraint naming the kind and the role", func() error {
		var events eventsv1.EventList
		if err := cluster.Client.List(ctx, &events); err != nil {
			return err
		}
		var seen []string
		for _, e := range events.Items {
			if e.Regarding.Kind != "QuotaEntity" || e.Regarding.Name != "e2e-rbac-kind" {
				continue
			}
			seen = append(seen, e.Reason+": "+e.Note)
			want := fmt.Sprintf(`cannot count ServiceAccount: the manager may not get, list, watch serviceaccounts: add a ClusterRole labelled %s="true" granting get, list and watch on it (it aggregates into %s); until then the buckets of %s are not written`,
				dynwatch.AggregateLabel, dynwatch.CountedKindsRole, rt)
			if e.Type == corev1.EventTypeWarning && e.Reason == "CannotReadKind" && e.Note == want {
				return nil
			}
		}
		return fmt.Errorf("events on the constraint: %q", seen)
	})

	// The other kinds are counted meanwhile.
	const cmType = "core/configmaps-rbac-kind"
	registration(t, cmType, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	grant(t, "e2e-rbac-kind-configmaps", consumer, cmType, 5)
	quotaEntity(t, "e2e-rbac-kind-configmaps", []string{ns}, map[string]any{"resourceType": cmType})
	mustAdmit(t, ns, "one")
	waitBucket(t, consumer, cmType, 1, 0)

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: ns}}
	create(t, sa)
	waitBucket(t, consumer, rt, 0, 1)
	// Held back: the observer writes a bucket within its write interval
	// (250 ms) of a change; this one must stay as admission left it.
	time.Sleep(3 * time.Second)
	if st := bucket(t, consumer, rt); st.Allocated != 0 || st.Reserved != 1 {
		t.Fatalf("bucket written without the kind's objects: allocated %d reserved %d", st.Allocated, st.Reserved)
	}

	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-count-serviceaccounts", Labels: map[string]string{dynwatch.AggregateLabel: "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"get", "list", "watch"}}},
	}
	// Kept: revoking it would leave the manager's informer for the kind
	// failing its relists for the rest of the suite.
	create(t, role)
	if err := cluster.WaitAggregated(ctx); err != nil {
		t.Fatal(err)
	}
	waitBucket(t, consumer, rt, 1, 0)
}
