package rbac

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// managerWrites are every write the chart lets the manager make, in both
// admission modes: "verb group/resource[names] where" (core group as "",
// cluster-wide as *). Adding to it is a security decision: say why in
// docs/operations.md's "Permissions, reviewed" first.
var managerWrites = []string{
	// Its own webhooks and Provider, by name: the rotator's CA bundle.
	"patch admissionregistration.k8s.io/mutatingwebhookconfigurations[quotakeeper-mutating-webhook-configuration] *",
	"update admissionregistration.k8s.io/mutatingwebhookconfigurations[quotakeeper-mutating-webhook-configuration] *",
	"patch admissionregistration.k8s.io/validatingwebhookconfigurations[quotakeeper-validating-webhook-configuration] *",
	"update admissionregistration.k8s.io/validatingwebhookconfigurations[quotakeeper-validating-webhook-configuration] *",
	"patch externaldata.gatekeeper.sh/providers[quotakeeper] *",
	"update externaldata.gatekeeper.sh/providers[quotakeeper] *",
	// Reviews: the grant webhook's delegation check, the metrics filter.
	"create authentication.k8s.io/tokenreviews[] *",
	"create authorization.k8s.io/subjectaccessreviews[] *",
	// Break-glass holds quota constraints at warn; the claim policies'
	// constraints are the manager's own kind.
	"patch constraints.gatekeeper.sh/*[] *",
	"update constraints.gatekeeper.sh/*[] *",
	"create constraints.gatekeeper.sh/quotaclaimpolicy[] *",
	"delete constraints.gatekeeper.sh/quotaclaimpolicy[] *",
	"patch constraints.gatekeeper.sh/quotaclaimpolicy[] *",
	"update constraints.gatekeeper.sh/quotaclaimpolicy[] *",
	"create events.k8s.io/events[] *",
	"patch events.k8s.io/events[] *",
	// Its own API.
	"create quota.miloapis.com/allowancebuckets[] *",
	"patch quota.miloapis.com/allowancebuckets/status[] *",
	"update quota.miloapis.com/allowancebuckets/status[] *",
	"patch quota.miloapis.com/claimcreationpolicies/status[] *",
	"update quota.miloapis.com/claimcreationpolicies/status[] *",
	"patch quota.miloapis.com/effectiveresourcegrants/status[] *",
	"update quota.miloapis.com/effectiveresourcegrants/status[] *",
	"patch quota.miloapis.com/grantcreationpolicies/status[] *",
	"update quota.miloapis.com/grantcreationpolicies/status[] *",
	"patch quota.miloapis.com/quotabypasses/status[] *",
	"update quota.miloapis.com/quotabypasses/status[] *",
	"patch quota.miloapis.com/resourceclaims/status[] *",
	"update quota.miloapis.com/resourceclaims/status[] *",
	"patch quota.miloapis.com/resourcegrants/status[] *",
	"update quota.miloapis.com/resourcegrants/status[] *",
	"patch quota.miloapis.com/resourceregistrations/status[] *",
	"update quota.miloapis.com/resourceregistrations/status[] *",
	"create quota.miloapis.com/effectiveresourcegrants[] *",
	"delete quota.miloapis.com/effectiveresourcegrants[] *",
	"patch quota.miloapis.com/effectiveresourcegrants[] *",
	"update quota.miloapis.com/effectiveresourcegrants[] *",
	"create quota.miloapis.com/resourceclaims[] *",
	"delete quota.miloapis.com/resourceclaims[] *",
	"patch quota.miloapis.com/resourceclaims[] *",
	"update quota.miloapis.com/resourceclaims[] *",
	"patch quota.miloapis.com/quotabypasses[] *",
	"update quota.miloapis.com/quotabypasses[] *",
	"update quota.miloapis.com/resourceclaims/finalizers[] *",
	"create quota.miloapis.com/resourcegrants[] *",
	"delete quota.miloapis.com/resourcegrants[] *",
	"update quota.miloapis.com/resourcegrants[] *",
	// In its own namespace: the published policy versions, events, the
	// leader-election Lease, its certificate's Secret by name.
	"create /configmaps[] quotakeeper-system",
	"update /configmaps[quotakeeper-counted-policies] quotakeeper-system",
	"create /events[] quotakeeper-system",
	"patch /events[] quotakeeper-system",
	"update /secrets[quotakeeper-webhook-server-cert] quotakeeper-system",
	"create coordination.k8s.io/leases[] quotakeeper-system",
	"delete coordination.k8s.io/leases[] quotakeeper-system",
	"patch coordination.k8s.io/leases[] quotakeeper-system",
	"update coordination.k8s.io/leases[] quotakeeper-system",
}

// readVerbs write nothing.
var readVerbs = []string{"get", "list", "watch"}

// The chart's grants to the manager, in both admission modes, are exactly
// managerWrites plus reads: a new write anywhere fails here until it is
// reviewed. And the API server's authorizer, given the chart's RBAC, lets
// the manager write its own webhooks, Provider and certificate Secret by
// name and nobody else's, and read no Secret outside its namespace:
// Gatekeeper's CA comes from Gatekeeper's webhook configuration, which
// holds no private key. Only externalData.clientCASecret, set on purpose,
// lets it get that one Secret.
func TestManagerLeastPrivilege(t *testing.T) {
	helm, err := localcluster.HelmBinary()
	if err != nil {
		t.Skip(err)
	}
	render := func(args ...string) []*unstructured.Unstructured {
		t.Helper()
		r, err := localcluster.RenderQuotakeeperChart(helm, args...)
		if err != nil {
			t.Fatal(err)
		}
		return r.Installed().Kinds("ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
	}
	modes := map[string][]*unstructured.Unstructured{
		"builtins":     render(),
		"externalData": render("--set", "admission=externalData"),
	}
	for mode, objs := range modes {
		got := writesOf(t, objs, localcluster.ManagerServiceAccount)
		for _, w := range got {
			if !slices.Contains(managerWrites, w) {
				t.Errorf("%s: the chart grants the manager %q, which nobody reviewed (managerWrites, docs/operations.md)", mode, w)
			}
		}
		for _, w := range managerWrites {
			if !slices.Contains(got, w) {
				t.Errorf("%s: the chart no longer grants the manager %q: take it out of managerWrites and the review table", mode, w)
			}
		}
	}
	if testing.Short() {
		t.Skip("the SubjectAccessReviews need kube-apiserver and etcd")
	}

	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := t.Context()
	for _, n := range []string{localcluster.ManagerServiceAccount.Namespace, localcluster.GatekeeperNamespace} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range modes["externalData"] {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	const (
		admission = "admissionregistration.k8s.io"
		gk        = localcluster.GatekeeperNamespace
		qk        = "quotakeeper-system"
	)
	for _, a := range []access{
		{verb: "patch", apiGroup: admission, resource: "validatingwebhookconfigurations", name: "quotakeeper-validating-webhook-configuration", allowed: true},
		{verb: "update", apiGroup: admission, resource: "mutatingwebhookconfigurations", name: "quotakeeper-mutating-webhook-configuration", allowed: true},
		{verb: "patch", apiGroup: admission, resource: "validatingwebhookconfigurations", name: "gatekeeper-validating-webhook-configuration"},
		{verb: "update", apiGroup: admission, resource: "mutatingwebhookconfigurations", name: "gatekeeper-mutating-webhook-configuration"},
		{verb: "delete", apiGroup: admission, resource: "validatingwebhookconfigurations", name: "quotakeeper-validating-webhook-configuration"},
		{verb: "create", apiGroup: admission, resource: "validatingwebhookconfigurations"},
		{verb: "get", apiGroup: admission, resource: "validatingwebhookconfigurations", name: "gatekeeper-validating-webhook-configuration", allowed: true},
		{verb: "patch", apiGroup: "externaldata.gatekeeper.sh", resource: "providers", name: "quotakeeper", allowed: true},
		{verb: "patch", apiGroup: "externaldata.gatekeeper.sh", resource: "providers", name: "another-provider"},
		{verb: "update", core: true, resource: "secrets", namespace: qk, name: "quotakeeper-webhook-server-cert", allowed: true},
		{verb: "update", core: true, resource: "secrets", namespace: qk, name: "another-secret"},
		{verb: "get", core: true, resource: "secrets", namespace: gk, name: "gatekeeper-webhook-server-cert"},
		{verb: "list", core: true, resource: "secrets", namespace: gk},
		{verb: "list", core: true, resource: "secrets"},
		{verb: "create", apiGroup: "authentication.k8s.io", resource: "tokenreviews", allowed: true},
	} {
		a.user = manager
		if err := check(ctx, env.Client, a); err != nil {
			t.Error(err)
		}
	}

	// Asked for on purpose: the one Secret, by name, and nothing else there.
	for _, o := range render("--set", "admission=externalData", "--set", "externalData.clientCASecret="+gk+"/gatekeeper-webhook-server-cert") {
		if o.GetNamespace() == gk {
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, a := range []access{
		{verb: "get", core: true, resource: "secrets", namespace: gk, name: "gatekeeper-webhook-server-cert", allowed: true},
		{verb: "get", core: true, resource: "secrets", namespace: gk, name: "another-secret"},
		{verb: "update", core: true, resource: "secrets", namespace: gk, name: "gatekeeper-webhook-server-cert"},
	} {
		a.user = manager
		if err := check(ctx, env.Client, a); err != nil {
			t.Error(err)
		}
	}
}

// writesOf lists every non-read verb the rendered roles bound to sa grant
// it, one "verb group/resource[names] namespace" each (namespace * for a
// ClusterRole bound cluster-wide). Aggregated ClusterRoles count through
// their labels, as the aggregation controller would fill them.
func writesOf(t *testing.T, objs []*unstructured.Unstructured, sa localcluster.ServiceAccount) []string {
	t.Helper()
	clusterRoles := map[string]*rbacv1.ClusterRole{}
	roles := map[string]*rbacv1.Role{}
	var crbs []*rbacv1.ClusterRoleBinding
	var rbs []*rbacv1.RoleBinding
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			clusterRoles[o.GetName()] = convert[rbacv1.ClusterRole](t, o)
		case "Role":
			roles[o.GetNamespace()+"/"+o.GetName()] = convert[rbacv1.Role](t, o)
		case "ClusterRoleBinding":
			crbs = append(crbs, convert[rbacv1.ClusterRoleBinding](t, o))
		case "RoleBinding":
			rbs = append(rbs, convert[rbacv1.RoleBinding](t, o))
		}
	}
	rulesOf := func(name string) []rbacv1.PolicyRule {
		cr, ok := clusterRoles[name]
		if !ok {
			return nil
		}
		rules := slices.Clone(cr.Rules)
		if cr.AggregationRule != nil {
			for _, other := range clusterRoles {
				for _, sel := range cr.AggregationRule.ClusterRoleSelectors {
					if matches(sel, other.Labels) {
						rules = append(rules, other.Rules...)
					}
				}
			}
		}
		return rules
	}
	var out []string
	add := func(rules []rbacv1.PolicyRule, where string) {
		for _, r := range rules {
			for _, verb := range r.Verbs {
				if slices.Contains(readVerbs, verb) {
					continue
				}
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						out = append(out, fmt.Sprintf("%s %s/%s[%s] %s", verb, g, res, strings.Join(r.ResourceNames, ","), where))
					}
				}
			}
		}
	}
	bound := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == sa.Namespace && s.Name == sa.Name
		})
	}
	for _, b := range crbs {
		if bound(b.Subjects) {
			add(rulesOf(b.RoleRef.Name), "*")
		}
	}
	for _, b := range rbs {
		if !bound(b.Subjects) {
			continue
		}
		if b.RoleRef.Kind == "ClusterRole" {
			add(rulesOf(b.RoleRef.Name), b.Namespace)
		} else if r, ok := roles[b.Namespace+"/"+b.RoleRef.Name]; ok {
			add(r.Rules, b.Namespace)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func matches(sel metav1.LabelSelector, labels map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(&sel)
	return err == nil && s.Matches(k8slabels.Set(labels))
}

func convert[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
		t.Fatal(err)
	}
	return out
}
