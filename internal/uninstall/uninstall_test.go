package uninstall_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/bypass"
	"github.com/quotakeeper/quotakeeper/internal/counted"
	"github.com/quotakeeper/quotakeeper/internal/dynwatch"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/internal/uninstall"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

var (
	ctx = context.Background()
	env *testenv.Env
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The QuotaEntity constraint kind, whose constraints QuotaBypasses relax.
	if _, _, err := testenv.InstallConstraintCRD(ctx, env.Config, "quotaentity"); err != nil {
		fmt.Fprintln(os.Stderr, "install the QuotaEntity constraint kind:", err)
		_ = env.Stop()
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
	}
}

func exists(t *testing.T, obj client.Object) bool {
	t.Helper()
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func webhookConfigurations() []client.Object {
	return []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "quotakeeper-validating-webhook-configuration"}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "quotakeeper-mutating-webhook-configuration"}},
	}
}

// hookClient applies the chart's pre-delete hook ServiceAccount and RBAC
// (helm template, as helm uninstall creates them) and returns a client that
// authenticates as that ServiceAccount: the hook runs with exactly the
// chart's permissions, so a rule the chart lacks fails here.
func hookClient(t *testing.T, ns string) client.Client {
	t.Helper()
	helm, err := localcluster.HelmBinary()
	if err != nil {
		t.Fatal(err)
	}
	r, err := localcluster.RenderQuotakeeperChart(helm)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range r.Kinds("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding") {
		if obj.GetAnnotations()["helm.sh/hook"] != "pre-delete" {
			continue
		}
		obj.SetResourceVersion("")
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create the hook's %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	sa := localcluster.ServiceAccount{Namespace: ns, Name: "quotakeeper-uninstall"}
	kubeconfig, err := env.Kubeconfig(sa.UserName(), sa.Groups()...)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Done when (issue 25): once the chart's pre-delete hook has run, nothing
// of quotakeeper keeps a namespace Terminating or a write refused: a
// ResourceClaim being deleted is gone (its finalizer removed), a
// QuotaBypass has put its constraint back to deny and lost its finalizer,
// the webhook configurations, the manager's Deployment and the objects the
// manager wrote itself are gone; grants stay. And the order holds: while a
// manager pod still runs, nothing else is touched.
func TestUninstallRemovesFinalizersWebhooksAndLeftovers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the envtest control plane")
	}
	const ns = "quotakeeper-system"
	create(t, builders.Namespace(ns).Obj(), builders.Namespace("team-a").Obj())

	labels := map[string]string{"app.kubernetes.io/name": "quotakeeper-manager"}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quotakeeper-manager"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "quotakeeper-manager"}}},
			},
		},
	}
	// A manager pod as the Deployment's ReplicaSet would have made it (no
	// controllers here make one).
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quotakeeper-manager-1", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "quotakeeper-manager"}}},
	}
	create(t, deployment, pod)
	create(t, webhookConfigurations()...)

	claim := builders.Claim("instance-1", "team-a").
		Consumer(quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-a"}).
		Request("example.com/cpu", 8000, nil).Obj()
	claim.Finalizers = []string{quotav1alpha1.ClaimFinalizer, "example.com/someone-elses"}
	other := builders.Claim("instance-2", "team-a").
		Consumer(quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-a"}).
		Request("example.com/cpu", 1000, nil).Obj()
	other.Finalizers = []string{quotav1alpha1.ClaimFinalizer}
	create(t, claim, other)
	if err := env.Client.Delete(ctx, claim); err != nil {
		t.Fatal(err)
	}

	// A bypass holding a constraint at warn, as its controller leaves it.
	constraint := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"enforcementAction": "warn"}}}
	constraint.SetGroupVersionKind(bypass.ConstraintGroupVersion.WithKind("QuotaEntity"))
	constraint.SetName("configmaps")
	constraint.SetAnnotations(map[string]string{quotav1alpha1.AnnotationBypass: "incident-42", quotav1alpha1.AnnotationEnforcementAction: "deny"})
	b := &quotav1alpha1.QuotaBypass{
		ObjectMeta: metav1.ObjectMeta{Name: "incident-42", Finalizers: []string{quotav1alpha1.BypassFinalizer}},
		Spec: quotav1alpha1.QuotaBypassSpec{Reason: "incident 42", Duration: metav1.Duration{Duration: time.Hour},
			Constraints: []quotav1alpha1.BypassedConstraint{{Kind: "QuotaEntity", Name: "configmaps"}}},
	}
	create(t, constraint, b)

	leftovers := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quotakeeper-webhook-server-cert"}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quotakeeper-manager.quota.miloapis.com"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: counted.ConfigMapName}},
	}
	create(t, leftovers...)
	// The aggregated ClusterRole of the counted kinds, as the chart
	// installs it: gone before Helm deletes what it aggregates.
	countedKinds := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: dynwatch.CountedKindsRole},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{"quota.miloapis.com/aggregate-to-manager": "true"}},
		}},
	}
	create(t, countedKinds)
	leftovers = append(leftovers, countedKinds)
	grant := builders.Grant("team-a-cpu", "team-a").
		Consumer(quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-a"}).
		Allowance("example.com/cpu", 10000).Obj()
	create(t, grant)

	hook := hookClient(t, ns)
	opts := uninstall.Options{
		Namespace: ns, SystemNamespace: ns, Deployment: "quotakeeper-manager",
		ValidatingWebhookConfiguration: "quotakeeper-validating-webhook-configuration",
		MutatingWebhookConfiguration:   "quotakeeper-mutating-webhook-configuration",
		WebhookSecret:                  "quotakeeper-webhook-server-cert",
		LeaderElectionID:               "quotakeeper-manager.quota.miloapis.com",
		CountedKindsRole:               dynwatch.CountedKindsRole,
		PodsGoneTimeout:                2 * time.Second,
		Log:                            logr.Discard(),
	}

	// The manager pod outlives the Deployment: the hook waits for it and
	// touches nothing else.
	err := uninstall.Run(ctx, hook, opts)
	if err == nil || !strings.Contains(err.Error(), "stop the manager: 1 manager pod(s) still running after 2s") {
		t.Fatalf("uninstall with a manager pod running: %v, want it to wait for the pod", err)
	}
	if exists(t, deployment.DeepCopy()) {
		t.Error("the manager's Deployment is still there")
	}
	for _, obj := range append(webhookConfigurations(), countedKinds.DeepCopy()) {
		if !exists(t, obj) {
			t.Errorf("%T %s deleted while a manager pod runs", obj, obj.GetName())
		}
	}
	if got := getClaim(t, other); !slicesEqual(got.Finalizers, []string{quotav1alpha1.ClaimFinalizer}) {
		t.Errorf("claim %s finalizers %v while a manager pod runs, want untouched", other.Name, got.Finalizers)
	}

	if err := env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	if err := uninstall.Run(ctx, hook, opts); err != nil {
		t.Fatal(err)
	}
	for _, obj := range append(webhookConfigurations(), leftovers...) {
		if exists(t, obj) {
			t.Errorf("%T %s/%s left behind", obj, obj.GetNamespace(), obj.GetName())
		}
	}
	// The deleted claim is gone once the other finalizer goes too: only
	// quotakeeper's was removed.
	if got := getClaim(t, claim); !slicesEqual(got.Finalizers, []string{"example.com/someone-elses"}) {
		t.Errorf("deleted claim's finalizers %v, want only example.com/someone-elses", got.Finalizers)
	}
	got := getClaim(t, claim)
	got.Finalizers = nil
	if err := env.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if exists(t, claim.DeepCopy()) {
		t.Errorf("claim %s still exists without finalizers", claim.Name)
	}
	if got := getClaim(t, other); len(got.Finalizers) != 0 || got.DeletionTimestamp != nil {
		t.Errorf("claim %s: finalizers %v, deletion %v; want none and not deleted", other.Name, got.Finalizers, got.DeletionTimestamp)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil || len(b.Finalizers) != 0 {
		t.Errorf("QuotaBypass: %v, finalizers %v; want it there without finalizers", err, b.Finalizers)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(constraint), constraint); err != nil {
		t.Fatal(err)
	}
	action, _, _ := unstructured.NestedString(constraint.Object, "spec", "enforcementAction")
	if action != "deny" || len(constraint.GetAnnotations()) != 0 {
		t.Errorf("constraint: enforcementAction %q, annotations %v; want deny and none", action, constraint.GetAnnotations())
	}
	if !exists(t, grant) {
		t.Error("the ResourceGrant was deleted; quota objects stay")
	}

	// Run again (a hook retried): nothing left to do, no error.
	if err := uninstall.Run(ctx, hook, opts); err != nil {
		t.Errorf("second run: %v", err)
	}
}

func getClaim(t *testing.T, c *quotav1alpha1.ResourceClaim) *quotav1alpha1.ResourceClaim {
	t.Helper()
	got := &quotav1alpha1.ResourceClaim{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	return got
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}
