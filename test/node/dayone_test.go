package node

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// The small Entity quota of day one: every ConfigMap of namespace
// quota-tenant counts 1 of node-e2e.quota/configmaps, of which the
// namespace is granted 3. The namespace's kube-root-ca.crt, which
// kube-controller-manager publishes before the constraint exists, counts
// too: quota counts what exists, whoever made it.
const (
	tenantNS         = "quota-tenant"
	entityType       = "node-e2e.quota/configmaps"
	entityConstraint = "node-e2e-configmaps"
	entityLimit      = 3
	rootCA           = "kube-root-ca.crt"
)

var (
	tenant        = quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: tenantNS}
	quotaEntityGK = schema.GroupVersionKind{Group: "constraints.gatekeeper.sh", Version: "v1beta1", Kind: "QuotaEntity"}
)

// Labels of the pods the charts run.
const (
	managerPods    = "app.kubernetes.io/name=quotakeeper-manager"
	gatekeeperPods = "gatekeeper.sh/system=yes"
)

// live are the ConfigMaps of the tenant that count: the test's, in the
// order they were admitted, and kube-root-ca.crt. next numbers the next.
var (
	live []string
	next = 1
)

// quotaClient is a controller-runtime client of the bed as its
// administrator, with quotakeeper's types.
func quotaClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(bed.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := quotav1alpha1.AddToScheme(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	return c
}

// testAdmissionThroughThePods sets up a small Entity quota with the
// shipped QuotaEntity template (installed by our chart) and checks the
// decisions Gatekeeper's pods make with the plugin: admitted up to the
// grant, then denied with exactly the message the user sees.
func testAdmissionThroughThePods(t *testing.T) {
	ctx := t.Context()
	c := quotaClient(t)
	createNamespace(t, tenantNS)
	// kube-controller-manager publishes the root CA into every namespace;
	// its create passes Gatekeeper's webhook (ConfigMaps are in its rules).
	testenv.Eventually(t, time.Minute, "ConfigMap "+tenantNS+"/"+rootCA+" published", func() error {
		_, err := bed.Clientset.CoreV1().ConfigMaps(tenantNS).Get(ctx, rootCA, metav1.GetOptions{})
		return err
	})
	live = []string{rootCA}

	reg := builders.Registration("node-e2e-configmaps", entityType).Consumer(quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"}).
		Type(quotav1alpha1.RegistrationTypeEntity).BaseUnit("configmap").ClaimingResources(quotav1alpha1.GroupKind{Kind: "ConfigMap"}).Obj()
	createAndWaitCondition(t, c, reg, quotav1alpha1.ConditionActive)
	grant := builders.Grant("configmaps", tenantNS).Consumer(tenant).Allowance(entityType, entityLimit).Obj()
	createAndWaitCondition(t, c, grant, quotav1alpha1.ConditionActive)

	constraint := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": quotaEntityGK.GroupVersion().String(),
		"kind":       quotaEntityGK.Kind,
		"metadata":   map[string]any{"name": entityConstraint},
		"spec": map[string]any{
			"match": map[string]any{
				"kinds":      []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"ConfigMap"}}},
				"namespaces": []any{tenantNS},
			},
			"parameters": map[string]any{"resourceType": entityType},
		},
	}}
	// The template's constraint kind exists once Gatekeeper has compiled
	// the template the chart installed.
	testenv.Eventually(t, 2*time.Minute, "constraint "+entityConstraint+" created", func() error {
		return c.Create(ctx, constraint.DeepCopy())
	})
	t.Logf("created ResourceRegistration %s (Entity, Namespace), ResourceGrant %s/%s (%d of %s), QuotaEntity %s over ConfigMaps of %s",
		reg.Name, tenantNS, grant.Name, entityLimit, entityType, entityConstraint, tenantNS)
	waitEnforcedByEveryPod(t, c)

	// kube-root-ca.crt predates the constraint and counts.
	waitBucket(t, c, int64(len(live)))
	for len(live) < entityLimit {
		admit(t)
	}
	waitBucket(t, c, entityLimit)
	deny(t)
}

// decideExactly is one round of decisions at the limit: a delete returns
// its quota (once the manager's observer has seen it go), the next create
// is admitted, and the one after it is denied with the exact message.
func decideExactly(t *testing.T) {
	t.Helper()
	c := quotaClient(t)
	gone := live[len(live)-1]
	if err := bed.Clientset.CoreV1().ConfigMaps(tenantNS).Delete(t.Context(), gone, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete ConfigMap %s/%s: %v", tenantNS, gone, err)
	}
	live = live[:len(live)-1]
	t.Logf("deleted ConfigMap %s/%s", tenantNS, gone)
	waitBucket(t, c, entityLimit-1)
	admit(t)
	waitBucket(t, c, entityLimit)
	deny(t)
}

// admit creates the next ConfigMap, which must be admitted.
func admit(t *testing.T) {
	t.Helper()
	name := fmt.Sprintf("cm-%d", next)
	next++
	err := createConfigMap(t, name)
	if err != nil {
		t.Fatalf("ConfigMap %s/%s, %d of %d: denied: %v", tenantNS, name, len(live)+1, entityLimit, err)
	}
	live = append(live, name)
	t.Logf("admitted ConfigMap %s/%s (%d of %d)", tenantNS, name, len(live), entityLimit)
}

// deny creates the next ConfigMap at the limit, which must be denied with
// exactly the message the user sees.
func deny(t *testing.T) {
	t.Helper()
	name := fmt.Sprintf("cm-%d", next)
	next++
	err := createConfigMap(t, name)
	want := fmt.Sprintf(`admission webhook "validation.gatekeeper.sh" denied the request: [%s] quota exceeded for Namespace %s: `+
		`requested 1 of %s, available 0 of %d (allocated %d, reserved 0); see EffectiveResourceGrant %s/%s (kubectl quota usage -n %s)`,
		entityConstraint, tenantNS, entityType, entityLimit, entityLimit,
		tenantNS, quotav1alpha1.EffectiveResourceGrantName(tenant, entityType), tenantNS)
	if err == nil {
		live = append(live, name)
		t.Fatalf("ConfigMap %s/%s admitted past the limit of %d", tenantNS, name, entityLimit)
	}
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("ConfigMap %s/%s past the limit:\n got %v\nwant %s", tenantNS, name, err, want)
	}
	t.Logf("denied ConfigMap %s/%s: %s", tenantNS, name, err)
}

func createConfigMap(t *testing.T, name string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenantNS}}
	_, err := bed.Clientset.CoreV1().ConfigMaps(tenantNS).Create(t.Context(), cm, metav1.CreateOptions{})
	return err
}

// waitBucket waits until the tenant's bucket counts allocated of the limit
// with nothing reserved, the observer's count of the live ConfigMaps.
func waitBucket(t *testing.T, c client.Client, allocated int64) {
	t.Helper()
	key := ledger.NewBucketKey(ledgerconv.Consumer(tenant), entityType, nil)
	obj := &quotav1alpha1.AllowanceBucket{}
	name := client.ObjectKey{Namespace: quotav1alpha1.BucketNamespace(tenant, quotav1alpha1.DefaultSystemNamespace), Name: key.Name()}
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("bucket %s at limit %d allocated %d reserved 0", name, entityLimit, allocated), func() error {
		if err := c.Get(t.Context(), name, obj); err != nil {
			return err
		}
		st := obj.Status
		if st.Limit != entityLimit || st.Allocated != allocated || st.Reserved != 0 || st.Available != entityLimit-allocated {
			return fmt.Errorf("limit %d allocated %d reserved %d available %d", st.Limit, st.Allocated, st.Reserved, st.Available)
		}
		return nil
	})
	t.Logf("bucket %s: limit %d, allocated %d, reserved 0, available %d", name, entityLimit, allocated, entityLimit-allocated)
}

// waitEnforcedByEveryPod waits until each Gatekeeper pod enforces the
// constraint (its status.byPod, by pod name) and the manager has published
// the constraint's policy version, after which the plugin decides with it.
func waitEnforcedByEveryPod(t *testing.T, c client.Client) {
	t.Helper()
	ctx := t.Context()
	testenv.Eventually(t, 2*time.Minute, "constraint "+entityConstraint+" enforced by every Gatekeeper pod", func() error {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(quotaEntityGK)
		if err := c.Get(ctx, client.ObjectKey{Name: entityConstraint}, got); err != nil {
			return err
		}
		enforced := map[string]bool{}
		byPod, _, _ := unstructured.NestedSlice(got.Object, "status", "byPod")
		for _, p := range byPod {
			if m, ok := p.(map[string]any); ok {
				id, _, _ := unstructured.NestedString(m, "id")
				e, _, _ := unstructured.NestedBool(m, "enforced")
				enforced[id] = e
			}
		}
		for _, p := range livePods(t, localcluster.GatekeeperNamespace, gatekeeperPods) {
			if !enforced[p.Name] {
				return fmt.Errorf("not enforced by %s (byPod %v)", p.Name, enforced)
			}
		}
		return nil
	})
	if err := (&localcluster.Cluster{Client: c}).WaitCounted(ctx, 2*time.Minute, quotaEntityGK, entityConstraint); err != nil {
		t.Fatal(err)
	}
	t.Logf("constraint %s enforced by every Gatekeeper pod and counted by the manager", entityConstraint)
}

// createAndWaitCondition creates obj and waits until its condition is True.
func createAndWaitCondition(t *testing.T, c client.Client, obj client.Object, condition string) {
	t.Helper()
	ctx := t.Context()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
	testenv.Eventually(t, time.Minute, fmt.Sprintf("%T %s %s", obj, obj.GetName(), condition), func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *quotav1alpha1.ResourceRegistration:
			conds = o.Status.Conditions
		case *quotav1alpha1.ResourceGrant:
			conds = o.Status.Conditions
		case *quotav1alpha1.ResourceClaim:
			conds = o.Status.Conditions
		}
		if !meta.IsStatusConditionTrue(conds, condition) {
			return fmt.Errorf("conditions %+v", conds)
		}
		return nil
	})
}

// livePods are the pods of namespace and selector not on their way out.
func livePods(t *testing.T, ns, selector string) []corev1.Pod {
	t.Helper()
	pods, err := bed.Clientset.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// waitReplaced waits until the namespace's pods of selector are want
// pods, none of them in old, each Ready, and checks them as
// checkPodsReady does.
func waitReplaced(t *testing.T, ns, selector string, old []string, want int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	testenv.Eventually(t, 3*time.Minute, fmt.Sprintf("%d new Ready pods %s in %s replacing %v", want, selector, ns, old), func() error {
		all, err := bed.Clientset.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		pods = pods[:0]
		for _, p := range all.Items {
			if slices.Contains(old, p.Name) {
				return fmt.Errorf("old pod %s still there", p.Name)
			}
			if p.DeletionTimestamp != nil {
				return fmt.Errorf("pod %s terminating", p.Name)
			}
			if !podReady(&p) {
				return fmt.Errorf("pod %s not Ready", p.Name)
			}
			pods = append(pods, p)
		}
		if len(pods) != want {
			return fmt.Errorf("%d pods %v", len(pods), podNames(pods))
		}
		return nil
	})
	for _, p := range pods {
		t.Logf("pod %s/%s: Ready on %s, IP %s, uid %s, restarts %d", ns, p.Name, p.Spec.NodeName, p.Status.PodIP, uids(p.Status.ContainerStatuses), restarts(&p))
	}
	checkPodsReady(t, ns)
	return pods
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// managerWebhookAnswers checks that the manager's validating webhook
// answers, through its Service, and denies a grant of an unregistered
// resource type with its message.
func managerWebhookAnswers(t *testing.T) {
	t.Helper()
	c := quotaClient(t)
	grant := builders.Grant("unregistered", tenantNS).Consumer(tenant).Allowance("node-e2e.quota/unregistered", 1).Obj()
	err := c.Create(t.Context(), grant)
	const want = `admission webhook "vresourcegrant.quota.miloapis.com" denied the request: `
	const why = "no ResourceRegistration declares this resource type"
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), why) {
		t.Fatalf("a grant of an unregistered resource type: got %v, want the manager's webhook to deny it (%s... %s)", err, want, why)
	}
	t.Logf("the manager's webhook denied a grant of an unregistered type: %v", err)
}

// testManagerPodsKilledAndRescheduled deletes every manager pod (the
// leader among them) and checks that the Deployment's new pods serve the
// webhooks (with the certificate in the Secret the rotator keeps) and run
// the controllers (a new leader's observer returns a deleted object's
// quota), and that quota is still exact.
func testManagerPodsKilledAndRescheduled(t *testing.T) {
	ctx := t.Context()
	old := podNames(livePods(t, localcluster.ChartNamespace, managerPods))
	lease, err := bed.Clientset.CoordinationV1().Leases(localcluster.ChartNamespace).Get(ctx, "quotakeeper-manager.quota.miloapis.com", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		t.Fatalf("the manager's leader-election Lease: %v %+v", err, lease)
	}
	t.Logf("manager pods %v, leader %s", old, *lease.Spec.HolderIdentity)
	if err := bed.Clientset.CoreV1().Pods(localcluster.ChartNamespace).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: managerPods}); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted manager pods %v", old)
	pods := waitReplaced(t, localcluster.ChartNamespace, managerPods, old, 2)
	testenv.Eventually(t, 2*time.Minute, "a new pod leads", func() error {
		l, err := bed.Clientset.CoordinationV1().Leases(localcluster.ChartNamespace).Get(ctx, "quotakeeper-manager.quota.miloapis.com", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, p := range pods {
			if l.Spec.HolderIdentity != nil && strings.HasPrefix(*l.Spec.HolderIdentity, p.Name+"_") {
				t.Logf("leader now %s", *l.Spec.HolderIdentity)
				return nil
			}
		}
		return fmt.Errorf("held by %v", l.Spec.HolderIdentity)
	})
	managerWebhookAnswers(t)
	// Under stock Gatekeeper the provider is reached through the
	// Service's ClusterIP: until kube-proxy routes it to a new pod, a
	// quota check is "quota cannot decide" (connection refused: no
	// endpoint), as it is in a cluster whose every manager pod went.
	waitServiceRoutes(t, localcluster.ChartNamespace, "quotakeeper-webhook-service", pods)
	decideExactly(t)
}

// waitServiceRoutes waits until the Service's EndpointSlices list exactly
// the pods, ready, and kube-proxy's rules on this host translate the
// Service to each pod's IP on each port.
func waitServiceRoutes(t *testing.T, ns, service string, pods []corev1.Pod) {
	t.Helper()
	start := time.Now()
	want := map[string]bool{}
	for _, p := range pods {
		want[p.Status.PodIP] = true
	}
	var targets []string
	testenv.Eventually(t, time.Minute, fmt.Sprintf("Service %s/%s routed by kube-proxy to pods %v", ns, service, podNames(pods)), func() error {
		list, err := bed.Clientset.DiscoveryV1().EndpointSlices(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + service})
		if err != nil {
			return err
		}
		ready := map[string]bool{}
		targets = targets[:0]
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || !*e.Conditions.Ready {
					continue
				}
				for _, addr := range e.Addresses {
					ready[addr] = true
					for _, port := range s.Ports {
						if port.Port != nil {
							targets = append(targets, fmt.Sprintf("%s:%d", addr, *port.Port))
						}
					}
				}
			}
		}
		if !maps.Equal(ready, want) {
			return fmt.Errorf("ready endpoints %v, want %v", slices.Sorted(maps.Keys(ready)), slices.Sorted(maps.Keys(want)))
		}
		rules, err := exec.CommandContext(t.Context(), "iptables-save", "-t", "nat").Output()
		if err != nil {
			return fmt.Errorf("iptables-save: %w", err)
		}
		for _, target := range targets {
			if !strings.Contains(string(rules), "--to-destination "+target) {
				return fmt.Errorf("no kube-proxy rule to %s yet", target)
			}
		}
		return nil
	})
	t.Logf("Service %s/%s: kube-proxy routes to %v (waited %s)", ns, service, targets, time.Since(start).Round(10*time.Millisecond))
}

// testGatekeeperRolled restarts Gatekeeper's webhook Deployment as a
// platform team does and checks its new pods decide exactly at once: no
// wait beyond the rollout's own (the pods' readiness).
func testGatekeeperRolled(t *testing.T) {
	old := podNames(livePods(t, localcluster.GatekeeperNamespace, "control-plane=controller-manager"))
	kubectl(t, "-n", localcluster.GatekeeperNamespace, "rollout", "restart", "deployment/gatekeeper-controller-manager")
	kubectl(t, "-n", localcluster.GatekeeperNamespace, "rollout", "status", "deployment/gatekeeper-controller-manager", "--timeout=5m")
	waitReplaced(t, localcluster.GatekeeperNamespace, "control-plane=controller-manager", old, len(old))
	decideExactly(t)
}

// upgradeAnnotation is the value helm upgrade changes.
const upgradeAnnotation = "node-e2e/upgraded"

// testHelmUpgradeWithAChangedValue upgrades our release to the same chart
// with one more pod annotation: the Deployment rolls, its new pods carry
// the annotation, and quota stays exact.
func testHelmUpgradeWithAChangedValue(t *testing.T) {
	old := podNames(livePods(t, localcluster.ChartNamespace, managerPods))
	helm(t, "upgrade", "quotakeeper", ourChart(t), "-n", localcluster.ChartNamespace,
		"--reuse-values", "--set", "manager.podAnnotations."+upgradeAnnotation+"=day-one", "--wait", "--timeout", "5m")
	status := helmOutput(t, "status", "quotakeeper", "-n", localcluster.ChartNamespace, "-o", "json")
	for _, want := range []string{`"version":2`, `"status":"deployed"`} {
		if !strings.Contains(status, want) {
			t.Fatalf("helm status after the upgrade does not say %s:\n%s", want, status)
		}
	}
	// The same chart version both times: only the value changed.
	var history []struct {
		Revision int    `json:"revision"`
		Status   string `json:"status"`
		Chart    string `json:"chart"`
	}
	if err := json.Unmarshal([]byte(helmOutput(t, "history", "quotakeeper", "-n", localcluster.ChartNamespace, "-o", "json")), &history); err != nil {
		t.Fatal(err)
	}
	if len(history) != 2 || history[0].Chart != history[1].Chart || history[0].Status != "superseded" || history[1].Status != "deployed" {
		t.Fatalf("helm history after the upgrade: %+v, want revision 1 superseded and 2 deployed, of one chart version", history)
	}
	t.Logf("release quotakeeper: revision 1 superseded, revision 2 deployed, both %s", history[1].Chart)
	pods := waitReplaced(t, localcluster.ChartNamespace, managerPods, old, 2)
	for _, p := range pods {
		if got := p.Annotations[upgradeAnnotation]; got != "day-one" {
			t.Fatalf("pod %s: annotation %s=%q, want day-one", p.Name, upgradeAnnotation, got)
		}
		t.Logf("pod %s carries %s=day-one", p.Name, upgradeAnnotation)
	}
	managerWebhookAnswers(t)
	decideExactly(t)
}

// testInstalledIsWhatHelmTemplateRenders compares what Helm installed
// (helm get manifest, helm get hooks) with helm template of the same
// chart, values, release name and namespace, byte for byte, and checks
// that every object of the manifest exists.
func testInstalledIsWhatHelmTemplateRenders(t *testing.T) {
	dir := t.TempDir()
	values := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(values, []byte(helmOutput(t, "get", "values", "quotakeeper", "-n", localcluster.ChartNamespace, "-o", "yaml")), 0o644); err != nil {
		t.Fatal(err)
	}
	chart := ourChart(t)
	// helm get manifest prints the stored manifest with Println: one
	// newline more than helm template writes.
	manifest, ok := strings.CutSuffix(helmOutput(t, "get", "manifest", "quotakeeper", "-n", localcluster.ChartNamespace), "\n")
	if !ok {
		t.Fatal("helm get manifest's output does not end in a newline")
	}
	rendered := helmOutput(t, "template", "quotakeeper", chart, "-n", localcluster.ChartNamespace, "-f", values, "--no-hooks")
	sameBytes(t, dir, "helm get manifest", manifest, "helm template --no-hooks", rendered)

	hooks := helmOutput(t, "get", "hooks", "quotakeeper", "-n", localcluster.ChartNamespace)
	withHooks := helmOutput(t, "template", "quotakeeper", chart, "-n", localcluster.ChartNamespace, "-f", values)
	renderedHooks := strings.TrimPrefix(withHooks, rendered)
	if renderedHooks == withHooks {
		t.Fatalf("helm template's output does not begin with its --no-hooks output")
	}
	sameBytes(t, dir, "helm get hooks", strings.TrimSpace(hooks), "helm template's hooks", strings.TrimSpace(renderedHooks))

	manifestFile := filepath.Join(dir, "manifest.yaml")
	if err := os.WriteFile(manifestFile, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	// Every namespaced object of the chart names its namespace (the
	// release's or Gatekeeper's), so no -n.
	names := strings.Fields(kubectlOutput(t, "get", "-f", manifestFile, "-o", "name"))
	if docs := strings.Count("\n"+manifest, "\n---\n"); len(names) != docs {
		t.Fatalf("kubectl get found %d objects of the manifest's %d", len(names), docs)
	}
	t.Logf("helm get manifest (%d bytes, %d objects) and helm get hooks (%d bytes) are what helm template renders with the release's values; every object of the manifest exists",
		len(manifest), len(names), len(hooks))
}

// sameBytes fails with a diff when a and b differ.
func sameBytes(t *testing.T, dir, aName, a, bName, b string) {
	t.Helper()
	if a == b {
		return
	}
	fa, fb := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	_ = os.WriteFile(fa, []byte(a), 0o644)
	_ = os.WriteFile(fb, []byte(b), 0o644)
	diff, _ := exec.Command("diff", "-u", "--label", aName, "--label", bName, fa, fb).CombinedOutput()
	t.Fatalf("%s differs from %s:\n%s", aName, bName, diff)
}

// The uninstall of docs/operations.md#uninstalling, command by command: the
// test runs these and fails if the section stops saying them.
var uninstallDocs = []string{
	"helm uninstall quotakeeper -n quotakeeper-system",
	"helm uninstall gatekeeper -n gatekeeper-system",
	"kubectl delete crd $(kubectl get crd -o name | grep quota.miloapis.com | cut -d/ -f2)",
	"kubectl delete namespace quotakeeper-system gatekeeper-system",
}

// Where a claim holds quotakeeper's finalizer when the chart goes.
const (
	claimNS   = "claim-tenant"
	claimType = "node-e2e.quota/cpu"
)

// testHelmUninstallLeavesNothingStuck uninstalls both charts as
// docs/operations.md#uninstalling says and checks that nothing is left
// that would block the cluster: no webhook configuration of ours (they
// fail closed), no finalizer of ours on a ResourceClaim (a namespace that
// held one deletes at once), CRDs kept until the docs' command removes
// them, then gone, and the charts' namespaces deleted.
func testHelmUninstallLeavesNothingStuck(t *testing.T) {
	ctx := t.Context()
	requireDocsSay(t, "Uninstalling", uninstallDocs)

	// A granted claim: the manager's mutating webhook gave it the finalizer
	// the claim controller removes once it has returned the amount.
	c := quotaClient(t)
	createNamespace(t, claimNS)
	claimer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: claimNS}
	reg := builders.Registration("node-e2e-cpu", claimType).Consumer(quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"}).
		Type(quotav1alpha1.RegistrationTypeAllocation).BaseUnit("millicores").
		ClaimingResources(quotav1alpha1.GroupKind{APIGroup: "compute.node-e2e.example", Kind: "Instance"}).Obj()
	createAndWaitCondition(t, c, reg, quotav1alpha1.ConditionActive)
	createAndWaitCondition(t, c, builders.Grant("cpu", claimNS).Consumer(claimer).Allowance(claimType, 4000).Obj(), quotav1alpha1.ConditionActive)
	claim := builders.Claim("instance-a", claimNS).Consumer(claimer).Request(claimType, 1000, nil).Obj()
	createAndWaitCondition(t, c, claim, quotav1alpha1.ConditionGranted)
	if !slices.Contains(claim.Finalizers, quotav1alpha1.ClaimFinalizer) {
		t.Fatalf("claim %s/%s granted without the finalizer %s: %v", claimNS, claim.Name, quotav1alpha1.ClaimFinalizer, claim.Finalizers)
	}
	t.Logf("claim %s/%s Granted (1000 of 4000 %s), finalizers %v", claimNS, claim.Name, claimType, claim.Finalizers)

	start := time.Now()
	helm(t, strings.Fields(uninstallDocs[0])[1:]...)
	t.Logf("helm uninstall quotakeeper took %s", time.Since(start).Round(time.Second))
	noWebhooksOf(t, "quotakeeper")
	if got := livePods(t, localcluster.ChartNamespace, managerPods); len(got) != 0 {
		t.Fatalf("manager pods left after helm uninstall: %v", podNames(got))
	}
	// What the uninstall hook removes: the finalizer, and what the
	// manager wrote itself.
	if err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
		t.Fatalf("claim %s/%s after helm uninstall (quota objects stay): %v", claimNS, claim.Name, err)
	}
	if len(claim.Finalizers) != 0 {
		t.Fatalf("claim %s/%s still has finalizers %v after helm uninstall", claimNS, claim.Name, claim.Finalizers)
	}
	for _, gone := range []struct {
		kind string
		get  func() error
	}{
		{"Secret quotakeeper-webhook-server-cert", func() error {
			_, err := bed.Clientset.CoreV1().Secrets(localcluster.ChartNamespace).Get(ctx, "quotakeeper-webhook-server-cert", metav1.GetOptions{})
			return err
		}},
		{"Lease quotakeeper-manager.quota.miloapis.com", func() error {
			_, err := bed.Clientset.CoordinationV1().Leases(localcluster.ChartNamespace).Get(ctx, "quotakeeper-manager.quota.miloapis.com", metav1.GetOptions{})
			return err
		}},
		{"Deployment quotakeeper-manager", func() error {
			_, err := bed.Clientset.AppsV1().Deployments(localcluster.ChartNamespace).Get(ctx, "quotakeeper-manager", metav1.GetOptions{})
			return err
		}},
		{"Job quotakeeper-uninstall", func() error {
			_, err := bed.Clientset.BatchV1().Jobs(localcluster.ChartNamespace).Get(ctx, "quotakeeper-uninstall", metav1.GetOptions{})
			return err
		}},
	} {
		if err := gone.get(); !apierrors.IsNotFound(err) {
			t.Fatalf("%s after helm uninstall: %v, want NotFound", gone.kind, err)
		}
	}
	crds := quotaCRDs(t)
	if len(crds) == 0 {
		t.Fatal("helm uninstall deleted quotakeeper's CRDs; the docs say they stay (crds.keep)")
	}
	t.Logf("after helm uninstall: no webhook configuration of ours, no manager pod, Deployment, hook Job, Secret or Lease; claim %s/%s without finalizers; %d CRDs kept, as the docs say",
		claimNS, claim.Name, len(crds))

	// Namespaces that held quota objects (a claim that had our finalizer,
	// grants, buckets, counted ConfigMaps) delete completely.
	for _, ns := range []string{claimNS, tenantNS} {
		waitNamespaceGone(t, time.Minute, ns, func() error {
			return bed.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		})
	}
	// Seconds after the uninstall, no cluster-wide RBAC of ours is left:
	// nothing (kube-controller-manager's ClusterRole aggregation among
	// them) wrote one back, so a reinstall owns every object it renders.
	noClusterRBACOf(t, "quotakeeper")

	// Then, as the docs go on: Gatekeeper, the CRDs, the namespaces.
	helm(t, strings.Fields(uninstallDocs[1])[1:]...)
	noWebhooksOf(t, "")
	kubectlShell(t, uninstallDocs[2])
	testenv.Eventually(t, time.Minute, "quotakeeper's CRDs deleted", func() error {
		if left := quotaCRDs(t); len(left) != 0 {
			return fmt.Errorf("left: %v", left)
		}
		return nil
	})
	t.Logf("every CRD of quota.miloapis.com gone")
	start = time.Now()
	kubectl(t, strings.Fields(uninstallDocs[3])[1:]...)
	for _, ns := range []string{localcluster.ChartNamespace, localcluster.GatekeeperNamespace} {
		waitNamespaceGone(t, 2*time.Minute-time.Since(start), ns, nil)
	}
}

// noWebhooksOf checks that no validating or mutating webhook configuration
// whose name starts with prefix is left ("": none at all).
func noWebhooksOf(t *testing.T, prefix string) {
	t.Helper()
	ctx := t.Context()
	admission := bed.Clientset.AdmissionregistrationV1()
	vwcs, err := admission.ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mwcs, err := admission.MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, w := range vwcs.Items {
		if strings.HasPrefix(w.Name, prefix) {
			left = append(left, "ValidatingWebhookConfiguration "+w.Name)
		}
	}
	for _, w := range mwcs.Items {
		if strings.HasPrefix(w.Name, prefix) {
			left = append(left, "MutatingWebhookConfiguration "+w.Name)
		}
	}
	if len(left) != 0 {
		t.Fatalf("webhook configurations left: %v", left)
	}
	if prefix == "" {
		t.Logf("no webhook configuration left in the cluster")
	} else {
		t.Logf("no webhook configuration named %s* left", prefix)
	}
}

// noClusterRBACOf checks that no ClusterRole or ClusterRoleBinding whose
// name starts with prefix is left.
func noClusterRBACOf(t *testing.T, prefix string) {
	t.Helper()
	rbac := bed.Clientset.RbacV1()
	roles, err := rbac.ClusterRoles().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bindings, err := rbac.ClusterRoleBindings().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, r := range roles.Items {
		if strings.HasPrefix(r.Name, prefix) {
			left = append(left, fmt.Sprintf("ClusterRole %s (managed by %v)", r.Name, managers(r.ManagedFields)))
		}
	}
	for _, b := range bindings.Items {
		if strings.HasPrefix(b.Name, prefix) {
			left = append(left, fmt.Sprintf("ClusterRoleBinding %s (managed by %v)", b.Name, managers(b.ManagedFields)))
		}
	}
	if len(left) != 0 {
		t.Fatalf("cluster RBAC left after helm uninstall: %v", left)
	}
	t.Logf("no ClusterRole or ClusterRoleBinding named %s* left", prefix)
}

func managers(fields []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, f := range fields {
		out = append(out, f.Manager)
	}
	return out
}

// waitNamespaceGone deletes the namespace (with del, if any) and waits
// until it is gone, failing with its conditions if it is stuck.
func waitNamespaceGone(t *testing.T, within time.Duration, ns string, del func() error) {
	t.Helper()
	ctx := t.Context()
	start := time.Now()
	if del != nil {
		if err := del(); err != nil {
			t.Fatalf("delete namespace %s: %v", ns, err)
		}
	}
	var last *corev1.Namespace
	for {
		got, err := bed.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			t.Logf("namespace %s deleted completely in %s", ns, time.Since(start).Round(100*time.Millisecond))
			return
		}
		if err == nil {
			last = got
		}
		if time.Since(start) > within {
			if last != nil {
				t.Fatalf("namespace %s still there %s after its delete: phase %s, conditions %+v", ns, within, last.Status.Phase, last.Status.Conditions)
			}
			t.Fatalf("namespace %s still there %s after its delete: %v", ns, within, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func quotaCRDs(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Fields(kubectlOutput(t, "get", "crd", "-o", "name")) {
		if strings.Contains(line, "quota.miloapis.com") {
			out = append(out, line)
		}
	}
	return out
}

// helmOutput runs helm and returns its standard output.
func helmOutput(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := localcluster.HelmBinary()
	if err != nil {
		t.Fatal(err)
	}
	return output(t, bin, args...)
}

func kubectlOutput(t *testing.T, args ...string) string {
	t.Helper()
	return output(t, "kubectl", args...)
}

func output(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+bed.Kubeconfig)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// kubectlShell runs a documented kubectl pipeline with sh.
func kubectlShell(t *testing.T, line string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+bed.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sh -c %q: %v\n%s", line, err, out)
	}
	t.Logf("%s", line)
}
