package webhooks_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// Done when: only the configured groups may add, change or remove a
// namespace's consumer label, under real RBAC that lets both users write
// namespaces; other labels stay free, and a refused write changes nothing.
func TestOnlyConfiguredGroupsMoveANamespaceBetweenConsumers(t *testing.T) {
	needEnv(t)
	newRegistration(t, "t40-projects", "t40.example.com/projects", organizationType)
	orgKey := quotav1alpha1.ConsumerLabelKey(organizationType.APIGroup, organizationType.Kind)

	// Both groups may write namespaces; RBAC cannot tell one label from another.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "t40-namespace-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces", "namespaces/status", "namespaces/finalize"}, Verbs: []string{"get", "create", "update", "patch"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "t40-namespace-writer"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "tenants"},
			{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "platform-admins"},
		}}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	alice := clientAs(t, "alice", "tenants")
	pat := clientAs(t, "pat", "platform-admins")

	refused := func(err error, op string) {
		t.Helper()
		want := `admission webhook "vnamespace-consumer-labels.quota.miloapis.com" denied the request: namespaces "t40-team" is forbidden: ` +
			`metadata.labels[resourcemanager.miloapis.com/organization]: Forbidden: names the consumer that pays for this namespace's quota; ` +
			`only members of system:masters, platform-admins may add, change or remove it, and "alice" is not`
		if !apierrors.IsForbidden(err) || err.Error() != want {
			t.Fatalf("%s: got %v\nwant %s", op, err, want)
		}
	}
	labels := func() map[string]string {
		t.Helper()
		var ns corev1.Namespace
		if err := k8s.Get(ctx, client.ObjectKey{Name: "t40-team"}, &ns); err != nil {
			t.Fatal(err)
		}
		delete(ns.Labels, corev1.LabelMetadataName)
		return ns.Labels
	}
	relabel := func(c client.Client, set map[string]*string) error {
		t.Helper()
		var ns corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: "t40-team"}, &ns); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(ns.DeepCopy())
		for k, v := range set {
			if v == nil {
				delete(ns.Labels, k)
			} else {
				ns.Labels[k] = *v
			}
		}
		return c.Patch(ctx, &ns, patch)
	}
	str := func(s string) *string { return &s }

	// A tenant cannot create a namespace that charges an organization.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t40-team", Labels: map[string]string{orgKey: "acme", "team": "web"}}}
	refused(alice.Create(ctx, ns.DeepCopy()), "create with the label")
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Fatalf("refused namespace stored: %v", err)
	}
	// Nor add the label later; other labels are its own.
	delete(ns.Labels, orgKey)
	if err := alice.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, ns) })
	refused(relabel(alice, map[string]*string{orgKey: str("acme")}), "add")
	if err := relabel(alice, map[string]*string{"team": str("api")}); err != nil {
		t.Fatalf("another label: %v", err)
	}
	// The platform team moves the namespace into acme; the tenant can
	// neither move it to another organization nor out of acme.
	if err := relabel(pat, map[string]*string{orgKey: str("acme")}); err != nil {
		t.Fatalf("platform team: %v", err)
	}
	refused(relabel(alice, map[string]*string{orgKey: str("globex")}), "change")
	refused(relabel(alice, map[string]*string{orgKey: nil}), "remove")
	// Nor through the subresources that write a namespace's metadata too
	// (issue 22): status and finalize keep the labels of what they are sent.
	for _, sub := range []string{"status", "finalize"} {
		var ns corev1.Namespace
		if err := alice.Get(ctx, client.ObjectKey{Name: "t40-team"}, &ns); err != nil {
			t.Fatal(err)
		}
		ns.Labels[orgKey] = "globex"
		refused(alice.SubResource(sub).Update(ctx, &ns), "change through "+sub)
	}
	if got := labels(); got[orgKey] != "acme" {
		t.Fatalf("labels %v after the refused subresource writes, want the organization acme", got)
	}
	if got := labels(); len(got) != 2 || got[orgKey] != "acme" || got["team"] != "api" {
		t.Fatalf("labels %v", got)
	}
	// A label no registration's consumer kind uses is not a consumer label.
	if err := relabel(alice, map[string]*string{"t40.example.com/project": str("web")}); err != nil {
		t.Fatalf("unregistered consumer kind: %v", err)
	}
}
