// Package rbac tests the persona ClusterRoles in config/rbac/personas.yaml,
// and the manager's least privilege (the rest of config/rbac, rendered by
// kustomize as `kubectl apply -k` installs it), with SubjectAccessReviews against a real kube-apiserver (envtest authorizes
// with RBAC and creates the bootstrap roles) and kube-controller-manager's
// clusterrole-aggregation controller, which fills the aggregated built-in
// `admin`, `edit` and `view` roles as it does in a cluster.
package rbac

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotakeeper/quotakeeper/internal/dynwatch"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

const (
	ns      = "team-a"
	otherNS = "team-b"
	group   = "quota.miloapis.com"
)

// Users, each bound to one role.
const (
	nsAdmin    = "alice"                                  // built-in admin in team-a
	nsEdit     = "bob"                                    // built-in edit in team-a
	nsView     = "carol"                                  // built-in view in team-a
	viewer     = "dave"                                   // quotakeeper-quota-viewer in team-a
	service    = "system:serviceaccount:team-a:instances" // quotakeeper-owning-service in team-a
	quotaAdmin = "erin"                                   // quotakeeper-quota-admin, cluster-wide
	breakGlass = "grace"                                  // quotakeeper-break-glass, cluster-wide
	orgAdmin   = "heidi"                                  // quotakeeper-delegated-quota-admin in team-a (its organization's namespace)
)

// The manager's ServiceAccount, bound by config/rbac.
var manager = localcluster.ManagerServiceAccount.UserName()

// access is one question put to the authorizer and the answer we want.
type access struct {
	user, verb, resource, subresource, namespace string
	// name: one object by name (resourceNames); "" asks about all.
	name string
	// core: a resource of the core ("") group; otherwise apiGroup, or
	// quota.miloapis.com when that is empty.
	core     bool
	apiGroup string
	allowed  bool
}

func (a access) String() string {
	r := a.resource
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	where := "cluster-wide"
	if a.namespace != "" {
		where = "in " + a.namespace
	}
	if a.name != "" {
		r += " " + a.name
	}
	return fmt.Sprintf("%s %s %s %s", a.user, a.verb, r, where)
}

func TestPersonas(t *testing.T) {
	if testing.Short() {
		t.Skip("needs kube-apiserver, etcd and kube-controller-manager")
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := t.Context()
	c := env.Client
	startAggregationController(t, env)

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: localcluster.ManagerServiceAccount.Namespace}}); err != nil {
		t.Fatal(err)
	}
	objs, err := localcluster.Kustomize(filepath.Join(testenv.RepoRoot(), "config", "rbac"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{ns, otherNS} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	for user, role := range map[string]string{
		nsAdmin: "admin", nsEdit: "edit", nsView: "view",
		viewer: "quotakeeper-quota-viewer", service: "quotakeeper-owning-service",
		orgAdmin: "quotakeeper-delegated-quota-admin",
	} {
		bind(ctx, t, c, ns, user, role)
	}
	bind(ctx, t, c, "", quotaAdmin, "quotakeeper-quota-admin")
	bind(ctx, t, c, "", breakGlass, "quotakeeper-break-glass")

	// The aggregation controller fills view, edit and admin: until then a
	// namespace admin can do nothing, and every denial below would pass for
	// the wrong reason. Wait for our viewer rules to reach admin through view
	// and edit, and for the bootstrap rules to be there too.
	for _, a := range []access{
		{user: nsAdmin, verb: "list", resource: "effectiveresourcegrants", namespace: ns, allowed: true},
		{user: nsAdmin, verb: "create", resource: "configmaps", core: true, namespace: ns, allowed: true},
		{user: nsEdit, verb: "list", resource: "effectiveresourcegrants", namespace: ns, allowed: true},
		{user: nsView, verb: "list", resource: "effectiveresourcegrants", namespace: ns, allowed: true},
		{user: manager, verb: "list", resource: "configmaps", core: true, allowed: true},
	} {
		testenv.Eventually(t, 30*time.Second, "aggregation: "+a.String(), func() error {
			return check(ctx, c, a)
		})
	}

	cases := []access{
		// A namespace's own admin and editor see its quota but cannot grant
		// it quota, write the ledger's buckets or decide claims.
		{user: nsAdmin, verb: "get", resource: "allowancebuckets", namespace: ns, allowed: true},
		{user: nsAdmin, verb: "list", resource: "resourceclaims", namespace: ns, allowed: true},
		{user: nsAdmin, verb: "create", resource: "resourcegrants", namespace: ns},
		{user: nsAdmin, verb: "update", resource: "resourcegrants", namespace: ns},
		{user: nsAdmin, verb: "patch", resource: "resourcegrants", namespace: ns},
		{user: nsAdmin, verb: "delete", resource: "resourcegrants", namespace: ns},
		{user: nsAdmin, verb: "create", resource: "allowancebuckets", namespace: ns},
		{user: nsAdmin, verb: "update", resource: "allowancebuckets", subresource: "status", namespace: ns},
		{user: nsAdmin, verb: "patch", resource: "allowancebuckets", subresource: "status", namespace: ns},
		{user: nsAdmin, verb: "update", resource: "resourceclaims", subresource: "status", namespace: ns},
		{user: nsAdmin, verb: "create", resource: "resourceclaims", namespace: ns},
		{user: nsAdmin, verb: "create", resource: "resourceregistrations"},
		{user: nsAdmin, verb: "create", resource: "grantcreationpolicies"},
		{user: nsEdit, verb: "create", resource: "resourcegrants", namespace: ns},
		{user: nsEdit, verb: "update", resource: "resourcegrants", namespace: ns},
		{user: nsEdit, verb: "update", resource: "allowancebuckets", subresource: "status", namespace: ns},
		{user: nsEdit, verb: "patch", resource: "allowancebuckets", subresource: "status", namespace: ns},
		{user: nsEdit, verb: "create", resource: "resourceclaims", namespace: ns},

		// view, and the quota viewer bound directly: read quota, nothing more.
		{user: nsView, verb: "get", resource: "allowancebuckets", namespace: ns, allowed: true},
		{user: nsView, verb: "watch", resource: "resourceclaims", namespace: ns, allowed: true},
		{user: nsView, verb: "create", resource: "resourceclaims", namespace: ns},
		{user: viewer, verb: "list", resource: "effectiveresourcegrants", namespace: ns, allowed: true},
		{user: viewer, verb: "get", resource: "effectiveresourcegrants", namespace: ns, allowed: true},
		{user: viewer, verb: "list", resource: "resourceclaims", namespace: ns, allowed: true},
		{user: viewer, verb: "list", resource: "allowancebuckets", namespace: ns, allowed: true},
		{user: viewer, verb: "list", resource: "effectiveresourcegrants", namespace: otherNS},
		{user: viewer, verb: "create", resource: "resourceclaims", namespace: ns},
		{user: viewer, verb: "list", resource: "resourcegrants", namespace: ns},
		{user: viewer, verb: "update", resource: "allowancebuckets", subresource: "status", namespace: ns},

		// The owning service claims and releases, in its namespace only, and
		// never writes a decision.
		{user: service, verb: "create", resource: "resourceclaims", namespace: ns, allowed: true},
		{user: service, verb: "delete", resource: "resourceclaims", namespace: ns, allowed: true},
		{user: service, verb: "get", resource: "resourceclaims", namespace: ns, allowed: true},
		{user: service, verb: "list", resource: "resourceclaims", namespace: ns, allowed: true},
		{user: service, verb: "watch", resource: "resourceclaims", namespace: ns, allowed: true},
		{user: service, verb: "update", resource: "resourceclaims", namespace: ns},
		{user: service, verb: "update", resource: "resourceclaims", subresource: "status", namespace: ns},
		{user: service, verb: "create", resource: "resourceclaims", namespace: otherNS},
		{user: service, verb: "create", resource: "resourcegrants", namespace: ns},

		// The quota admin grants and registers anywhere, but the ledger's
		// buckets and every status stay the controllers'.
		{user: quotaAdmin, verb: "create", resource: "resourcegrants", namespace: ns, allowed: true},
		{user: quotaAdmin, verb: "update", resource: "resourcegrants", namespace: otherNS, allowed: true},
		{user: quotaAdmin, verb: "delete", resource: "resourcegrants", namespace: ns, allowed: true},
		{user: quotaAdmin, verb: "create", resource: "resourceregistrations", allowed: true},
		{user: quotaAdmin, verb: "create", resource: "grantcreationpolicies", allowed: true},
		{user: quotaAdmin, verb: "create", resource: "claimcreationpolicies", allowed: true},
		{user: quotaAdmin, verb: "list", resource: "allowancebuckets", namespace: ns, allowed: true},
		{user: quotaAdmin, verb: "list", resource: "effectiveresourcegrants", namespace: ns, allowed: true},
		{user: quotaAdmin, verb: "update", resource: "allowancebuckets", subresource: "status", namespace: ns},
		{user: quotaAdmin, verb: "create", resource: "allowancebuckets", namespace: ns},
		{user: quotaAdmin, verb: "update", resource: "resourcegrants", subresource: "status", namespace: ns},
		{user: quotaAdmin, verb: "create", resource: "resourceclaims", namespace: ns},

		// An organization's admin writes grants in its namespaces (the
		// webhook admits only delegated ones from it) and nowhere else: not
		// in another organization's namespace, not where the platform's own
		// grants live (which is what the webhook asks to tell a platform
		// grant's writer), not the ledger's buckets nor any status.
		{user: orgAdmin, verb: "create", resource: "resourcegrants", namespace: ns, allowed: true},
		{user: orgAdmin, verb: "update", resource: "resourcegrants", namespace: ns, allowed: true},
		{user: orgAdmin, verb: "patch", resource: "resourcegrants", namespace: ns, allowed: true},
		{user: orgAdmin, verb: "delete", resource: "resourcegrants", namespace: ns, allowed: true},
		{user: orgAdmin, verb: "list", resource: "effectiveresourcegrants", namespace: ns, allowed: true},
		{user: orgAdmin, verb: "list", resource: "allowancebuckets", namespace: ns, allowed: true},
		{user: orgAdmin, verb: "create", resource: "resourcegrants", namespace: otherNS},
		{user: orgAdmin, verb: "update", resource: "resourcegrants", namespace: otherNS},
		{user: orgAdmin, verb: "create", resource: "resourcegrants", namespace: localcluster.ManagerServiceAccount.Namespace},
		{user: orgAdmin, verb: "update", resource: "resourcegrants", namespace: localcluster.ManagerServiceAccount.Namespace},
		{user: orgAdmin, verb: "delete", resource: "resourcegrants", namespace: localcluster.ManagerServiceAccount.Namespace},
		{user: orgAdmin, verb: "update", resource: "resourcegrants", subresource: "status", namespace: ns},
		{user: orgAdmin, verb: "update", resource: "allowancebuckets", subresource: "status", namespace: ns},
		{user: orgAdmin, verb: "create", resource: "resourceregistrations"},
		{user: orgAdmin, verb: "create", resource: "grantcreationpolicies"},
		{user: orgAdmin, verb: "create", resource: "resourceclaims", namespace: ns},
		{user: orgAdmin, verb: "create", resource: "quotabypasses"},
		// Those who write platform grants pass the webhook's question.
		{user: quotaAdmin, verb: "create", resource: "resourcegrants", namespace: localcluster.ManagerServiceAccount.Namespace, allowed: true},
		{user: manager, verb: "create", resource: "resourcegrants", namespace: localcluster.ManagerServiceAccount.Namespace, allowed: true},
		{user: manager, verb: "create", resource: "subjectaccessreviews", apiGroup: "authorization.k8s.io", allowed: true},

		// Only break-glass creates or ends a QuotaBypass; the quota admin
		// sees them (and their audit Events' object) but cannot make one,
		// and namespace roles know nothing of them.
		{user: breakGlass, verb: "create", resource: "quotabypasses", allowed: true},
		{user: breakGlass, verb: "delete", resource: "quotabypasses", allowed: true},
		{user: breakGlass, verb: "list", resource: "quotabypasses", allowed: true},
		{user: breakGlass, verb: "update", resource: "quotabypasses", subresource: "status"},
		{user: breakGlass, verb: "create", resource: "resourcegrants", namespace: ns},
		{user: quotaAdmin, verb: "list", resource: "quotabypasses", allowed: true},
		{user: quotaAdmin, verb: "create", resource: "quotabypasses"},
		{user: quotaAdmin, verb: "update", resource: "quotabypasses"},
		{user: quotaAdmin, verb: "delete", resource: "quotabypasses"},
		{user: nsAdmin, verb: "create", resource: "quotabypasses"},
		{user: nsAdmin, verb: "list", resource: "quotabypasses"},
		{user: nsEdit, verb: "create", resource: "quotabypasses"},
		{user: viewer, verb: "create", resource: "quotabypasses"},
		// The manager reads the kinds the shipped templates count, through
		// the aggregated quotakeeper-manager-counted-kinds, and nothing else
		// outside quota: never Secrets but its own webhook certificate's.
		{user: manager, verb: "list", resource: "configmaps", core: true, allowed: true},
		{user: manager, verb: "watch", resource: "configmaps", core: true, namespace: ns, allowed: true},
		{user: manager, verb: "get", resource: "persistentvolumeclaims", core: true, namespace: ns, allowed: true},
		{user: manager, verb: "watch", resource: "deployments", apiGroup: "apps", allowed: true},
		{user: manager, verb: "list", resource: "statefulsets", apiGroup: "apps", allowed: true},
		{user: manager, verb: "list", resource: "namespaces", core: true, allowed: true},
		{user: manager, verb: "list", resource: "constrainttemplates", apiGroup: "templates.gatekeeper.sh", allowed: true},
		{user: manager, verb: "list", resource: "secrets", core: true},
		{user: manager, verb: "get", resource: "secrets", core: true, namespace: ns},
		{user: manager, verb: "watch", resource: "secrets", core: true, namespace: ns},
		{user: manager, verb: "get", resource: "secrets", core: true, namespace: localcluster.ManagerServiceAccount.Namespace, allowed: true},
		{user: manager, verb: "list", resource: "services", core: true},
		{user: manager, verb: "list", resource: "pods", core: true},
		{user: manager, verb: "create", resource: "configmaps", core: true, namespace: ns},
		{user: manager, verb: "update", resource: "deployments", apiGroup: "apps", namespace: ns},
		{user: manager, verb: "update", resource: "allowancebuckets", subresource: "status", namespace: ns, allowed: true},
		{user: manager, verb: "create", resource: "resourcegrants", namespace: ns, allowed: true},
		// Nor may a namespace's owners widen what it reads.
		{user: nsAdmin, verb: "update", resource: "clusterroles", apiGroup: "rbac.authorization.k8s.io"},
	}
	for _, a := range cases {
		if err := check(ctx, c, a); err != nil {
			t.Error(err)
		}
	}

	// A platform team lets the manager count another kind with one
	// ClusterRole labelled to join quotakeeper-manager-counted-kinds.
	t.Run("a labelled ClusterRole lets the manager read one more kind", func(t *testing.T) {
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "count-services", Labels: map[string]string{dynwatch.AggregateLabel: "true"}},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "watch"}}},
		}
		if err := c.Create(ctx, role); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "manager may list services", func() error {
			return check(ctx, c, access{user: manager, verb: "list", resource: "services", core: true, allowed: true})
		})
		for _, a := range []access{
			{user: manager, verb: "watch", resource: "services", core: true, namespace: ns, allowed: true},
			{user: manager, verb: "update", resource: "services", core: true, namespace: ns},
			{user: manager, verb: "list", resource: "secrets", core: true},
		} {
			if err := check(ctx, c, a); err != nil {
				t.Error(err)
			}
		}
	})

	// A namespace admin may create RoleBindings in its namespace, but RBAC
	// refuses one that grants what the admin does not hold: it cannot bind
	// itself the quota admin role there.
	t.Run("namespace admin cannot bind itself quota admin", func(t *testing.T) {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: nsAdmin}
		asAdmin, err := client.New(cfg, client.Options{Scheme: c.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		err = asAdmin.Create(ctx, binding(ns, "self-quota-admin", nsAdmin, "quotakeeper-quota-admin"))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held`) {
			t.Fatalf("binding quotakeeper-quota-admin as the namespace admin: got %v, want Forbidden for escalation", err)
		}
		// The control: binding what it holds is allowed.
		if err := asAdmin.Create(ctx, binding(ns, "viewer-for-frank", "frank", "quotakeeper-quota-viewer")); err != nil {
			t.Fatalf("binding quotakeeper-quota-viewer as the namespace admin: %v", err)
		}
	})
}

// check asks the apiserver's authorizer whether a.user may do it.
func check(ctx context.Context, c client.Client, a access) error {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   a.user,
		Groups: []string{"system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: a.namespace, Verb: a.verb, Group: group, Resource: a.resource, Subresource: a.subresource, Name: a.name,
		},
	}}
	if a.core {
		sar.Spec.ResourceAttributes.Group = ""
	} else if a.apiGroup != "" {
		sar.Spec.ResourceAttributes.Group = a.apiGroup
	}
	if err := c.Create(ctx, sar); err != nil {
		return fmt.Errorf("%s: %w", a, err)
	}
	if sar.Status.Allowed != a.allowed {
		return fmt.Errorf("%s: allowed=%t (%q), want %t", a, sar.Status.Allowed, sar.Status.Reason, a.allowed)
	}
	return nil
}

func bind(ctx context.Context, t *testing.T, c client.Client, namespace, user, role string) {
	t.Helper()
	var obj client.Object = binding(namespace, user+"-"+role, user, role)
	if namespace == "" {
		b := obj.(*rbacv1.RoleBinding)
		obj = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.Name}, Subjects: b.Subjects, RoleRef: b.RoleRef}
	}
	if err := c.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

func binding(namespace, name, user, clusterRole string) *rbacv1.RoleBinding {
	name = strings.NewReplacer(":", "-").Replace(name)
	subject := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Subjects:   []rbacv1.Subject{subject},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
	}
}

// startAggregationController runs kube-controller-manager with only the
// clusterrole-aggregation controller, as the cluster's own would run it.
func startAggregationController(t *testing.T, env *testenv.Env) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig, err := env.Kubeconfig("kube-controller-manager", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	kcm := &localcluster.Process{
		Name: "kube-controller-manager",
		Path: filepath.Join(assets, "kube-controller-manager"),
		Args: []string{
			"--kubeconfig=" + path,
			"--controllers=clusterrole-aggregation",
			"--leader-elect=false",
			"--use-service-account-credentials=false",
			"--bind-address=127.0.0.1",
			"--secure-port=0",
		},
		LogPath: filepath.Join(dir, "kube-controller-manager.log"),
	}
	if err := kcm.Start(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		kcm.Stop()
		if t.Failed() {
			if log, err := os.ReadFile(kcm.LogPath); err == nil {
				t.Logf("kube-controller-manager log:\n%s", log)
			}
		}
	})
}
