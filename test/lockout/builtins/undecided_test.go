package builtins_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// pluginRole is Gatekeeper's ClusterRole for the plugin
// (config/gatekeeper/rbac.yaml), through which it writes bucket status.
const pluginRole = "quotakeeper-gatekeeper-plugin"

// Done when (issue 24, readable failures): in the builtins mode, a quota check whose bucket
// write fails (here Gatekeeper may no longer update allowancebuckets/status,
// as after an RBAC mistake) denies the create, and the tenant reads that
// quota cannot decide, why, and what to do — not OPA's eval_builtin_error.
func TestBuiltinFailureReadsInPlainWords(t *testing.T) {
	ctx := context.Background()
	const ns, rt, name = "unwritable", "lockout.quota/configmaps", "unwritable"
	c := cluster.Client
	mustCreate(t, builders.Namespace(ns).Obj())
	reg := builders.Registration("lockout-configmaps", rt).
		Consumer(quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"}).Type(quotav1alpha1.RegistrationTypeEntity).
		BaseUnit("count").ClaimingResources(quotav1alpha1.GroupKind{Kind: "ConfigMap"}).Obj()
	mustCreate(t, reg)
	waitActive(t, reg, &reg.Status.Conditions)
	g := builders.Grant(name, ns).Consumer(quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}).Allowance(rt, 5).Obj()
	mustCreate(t, g)
	waitActive(t, g, &g.Status.Conditions)
	constraint := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "constraints.gatekeeper.sh/v1beta1",
		"kind":       "QuotaEntity",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"match": map[string]any{
				"kinds":      []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"ConfigMap"}}},
				"namespaces": []any{ns},
			},
			"parameters": map[string]any{"resourceType": rt},
		},
	}}
	if err := cluster.Apply(ctx, time.Minute, constraint); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitEnforced(ctx, 2*time.Minute, constraint.GroupVersionKind(), name); err != nil {
		t.Fatal(err)
	}

	// Take away the status update, and give it back after.
	var role rbacv1.ClusterRole
	if err := c.Get(ctx, client.ObjectKey{Name: pluginRole}, &role); err != nil {
		t.Fatal(err)
	}
	saved := slices.Clone(role.Rules)
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "allowancebuckets/status")
	})
	if len(role.Rules) == len(saved) {
		t.Fatalf("ClusterRole %s grants no allowancebuckets/status", pluginRole)
	}
	if err := c.Update(ctx, &role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var r rbacv1.ClusterRole
		if err := c.Get(ctx, client.ObjectKey{Name: pluginRole}, &r); err == nil {
			r.Rules = saved
			_ = c.Update(ctx, &r)
		}
	})

	want := regexp.MustCompile(`^admission webhook "validation.gatekeeper.sh" denied the request: \[` + name + `\] ` +
		`quota cannot decide: reserving claim "[0-9a-f-]{36}": (.+) is forbidden: User "system:serviceaccount:gatekeeper-system:gatekeeper-admin" cannot update resource "allowancebuckets/status" in API group "quota.miloapis.com" in the namespace "` + ns + `"` +
		regexp.QuoteMeta(`; the request is denied and nothing was reserved. Retry in a minute; if it keeps failing, tell your platform team (docs/troubleshooting.md#quota-cannot-decide)`) + `$`)
	testenv.Eventually(t, time.Minute, "the create denied in plain words", func() error {
		err := c.Create(ctx, configMap(ns, "cm-1"))
		if err == nil {
			return fmt.Errorf("admitted: Gatekeeper could still write the bucket")
		}
		if !want.MatchString(err.Error()) {
			return fmt.Errorf("got %w\nwant %s", err, want)
		}
		t.Logf("the tenant reads: %v", err)
		return nil
	})
}

func mustCreate(t *testing.T, obj client.Object) {
	t.Helper()
	if err := cluster.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

func waitActive(t *testing.T, obj client.Object, conditions *[]metav1.Condition) {
	t.Helper()
	testenv.Eventually(t, time.Minute, fmt.Sprintf("%T %s Active", obj, obj.GetName()), func() error {
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(*conditions, quotav1alpha1.ConditionActive) {
			return fmt.Errorf("conditions %+v", *conditions)
		}
		return nil
	})
}

func configMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
}
