package node

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/checkout"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/nodebed"
)

// gatekeeperUnpullable are the stock chart's hooks whose images come from a
// registry this machine cannot reach (openpolicyagent/gatekeeper-crds,
// curlimages/curl): turned off here, and only here. Helm still installs
// the chart's crds/ directory itself.
var gatekeeperUnpullable = []string{
	"upgradeCRDs.enabled=false",
	"postInstall.labelNamespace.enabled=false",
	"postInstall.probeWebhook.enabled=false",
}

// testChartsInstallAsDocumented installs Gatekeeper's stock chart with
// config/gatekeeper/values.yaml and our chart, with our images, as
// docs/operations.md#install does, and checks what only a real node shows:
// every Deployment's pods become Ready (their probes pass) on the pod
// network as the user their chart or our image says, and the apiserver calls both webhooks through
// their Services (aggregator routing to the pods' IPs): Gatekeeper's, which
// fails closed, admits a namespace with a consumer label, and the
// manager's denies a grant of an unregistered resource type.
func testChartsInstallAsDocumented(t *testing.T) {
	// Gatekeeper first, without waiting: built with the plugin, it exits
	// until quotakeeper's CRDs exist ("grant informer: no matches for kind
	// ResourceGrant"), which the second chart installs.
	installGatekeeperChart(t, "values.yaml", imageOf(t, gatekeeperImage))

	helm(t, append(installOurChart(t), "--wait", "--timeout", "5m")...)

	// The restart docs/operations.md asks for, so that Gatekeeper reads
	// the plugin's settings; here it also spares the crash loop's backoff.
	deployments := []string{"deployment/gatekeeper-controller-manager", "deployment/gatekeeper-audit"}
	kubectl(t, append([]string{"-n", localcluster.GatekeeperNamespace, "rollout", "restart"}, deployments...)...)
	for _, d := range deployments {
		kubectl(t, "-n", localcluster.GatekeeperNamespace, "rollout", "status", d, "--timeout=5m")
	}

	for _, ns := range []string{localcluster.GatekeeperNamespace, localcluster.ChartNamespace} {
		checkPodsReady(t, ns)
	}

	ctx := t.Context()
	consumer := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Labels: map[string]string{"node-e2e.quotakeeper.io/consumer": "a"}}}
	if _, err := bed.Clientset.CoreV1().Namespaces().Create(ctx, consumer, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a namespace with a consumer label, which Gatekeeper's webhook (failing closed) must admit: %v", err)
	}
	t.Logf("Gatekeeper's webhook admitted namespace %s (labels %v)", consumer.Name, consumer.Labels)

	c, err := client.New(bed.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := quotav1alpha1.AddToScheme(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	grant := &quotav1alpha1.ResourceGrant{
		ObjectMeta: metav1.ObjectMeta{Name: "unregistered", Namespace: consumer.Name},
		Spec: quotav1alpha1.ResourceGrantSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: consumer.Name},
			Allowances: []quotav1alpha1.Allowance{{
				ResourceType: "core/configmaps",
				Buckets:      []quotav1alpha1.GrantBucket{{Amount: 5}},
			}},
		},
	}
	err = c.Create(ctx, grant)
	const want = "no ResourceRegistration declares this resource type"
	if err == nil || !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("a grant of an unregistered resource type: got %v, want the manager's webhook to deny it (%q)", err, want)
	}
	t.Logf("the manager's webhook denied a grant of an unregistered type: %v", err)
}

// installGatekeeperChart installs Gatekeeper's chart as docs/operations.md
// says, with config/gatekeeper/<values> and image (repository:tag), without
// waiting: Gatekeeper with the plugin exits until quotakeeper's CRDs exist.
func installGatekeeperChart(t *testing.T, values, image string) {
	t.Helper()
	root, err := checkout.Root()
	if err != nil {
		t.Fatal(err)
	}
	chart, err := localcluster.GatekeeperChartDir()
	if err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(image, ":")
	args := []string{"install", "gatekeeper", chart,
		"-n", localcluster.GatekeeperNamespace, "--create-namespace",
		"-f", filepath.Join(root, "config", "gatekeeper", values),
		"--set", "image.repository=" + repo, "--set", "image.release=" + tag}
	for _, v := range gatekeeperUnpullable {
		args = append(args, "--set", v)
	}
	helm(t, args...)
}

// ourChart is the chart the node installs: the release's package when
// the node runs a release (releaseEnv), else charts/quotakeeper.
func ourChart(t *testing.T) string {
	t.Helper()
	if release := os.Getenv(releaseEnv); release != "" {
		packages, err := filepath.Glob(filepath.Join(release, "quotakeeper-*.tgz"))
		if err != nil || len(packages) != 1 {
			t.Fatalf("the release %s: want one chart package quotakeeper-*.tgz, got %v (%v)", release, packages, err)
		}
		return packages[0]
	}
	root, err := checkout.Root()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "charts", "quotakeeper")
}

// installOurChart is the helm install of our chart as docs/operations.md#install
// says, with the manager image the node imported: from a checkout the
// repository and tag; from a release only the repository, since the
// package's appVersion is the release's tag.
func installOurChart(t *testing.T, sets ...string) []string {
	t.Helper()
	repo, tag, _ := strings.Cut(imageOf(t, managerImage), ":")
	args := []string{"install", "quotakeeper", ourChart(t), "-n", localcluster.ChartNamespace, "--create-namespace",
		"--set", "manager.image.repository=" + repo}
	if os.Getenv(releaseEnv) == "" {
		args = append(args, "--set", "manager.image.tag="+tag)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return args
}

// helm runs the helm CLI make builds against the bed, as the administrator.
func helm(t *testing.T, args ...string) {
	t.Helper()
	bin, err := localcluster.HelmBinary()
	if err != nil {
		t.Fatal(err)
	}
	run(t, bin, args...)
}

// kubectl runs kubectl from PATH against the bed, as the administrator.
func kubectl(t *testing.T, args ...string) {
	t.Helper()
	run(t, "kubectl", args...)
}

func run(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+bed.Kubeconfig)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out.String())
	}
	t.Logf("%s %s", filepath.Base(bin), strings.Join(args, " "))
}

// checkPodsReady checks every pod of the namespace that is not on its way
// out (a rollout's old ones): on the node, Ready, an IP of the pod network,
// every container run as the user its chart asks for (runAsUser: 1000 in
// Gatekeeper's) or else as our images' 65532.
func checkPodsReady(t *testing.T, ns string) {
	t.Helper()
	pods, err := bed.Clientset.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		checked++
		if !podReady(&p) {
			t.Errorf("pod %s/%s is not Ready: %+v", ns, p.Name, p.Status.Conditions)
		}
		if !inPodCIDR(p.Status.PodIP) {
			t.Errorf("pod %s/%s has IP %q, not one of %s", ns, p.Name, p.Status.PodIP, nodebed.PodCIDR)
		}
		for _, s := range p.Status.ContainerStatuses {
			want := wantUser(&p, s.Name)
			if s.User == nil || s.User.Linux == nil || s.User.Linux.UID != want {
				t.Errorf("pod %s/%s container %s: user %+v, want uid %d", ns, p.Name, s.Name, s.User, want)
			}
		}
		t.Logf("pod %s/%s: Ready on %s, IP %s, image %s, uid %s", ns, p.Name, p.Spec.NodeName, p.Status.PodIP, p.Spec.Containers[0].Image, uids(p.Status.ContainerStatuses))
	}
	if checked == 0 {
		t.Fatalf("no pods in %s", ns)
	}
}

// wantUser is the uid a container runs as: its runAsUser, its pod's, or
// the image's user, 65532 in ours.
func wantUser(p *corev1.Pod, container string) int64 {
	for _, c := range p.Spec.Containers {
		if c.Name == container && c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			return *c.SecurityContext.RunAsUser
		}
	}
	if sc := p.Spec.SecurityContext; sc != nil && sc.RunAsUser != nil {
		return *sc.RunAsUser
	}
	return nonroot
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func uids(statuses []corev1.ContainerStatus) string {
	var out []string
	for _, s := range statuses {
		if s.User != nil && s.User.Linux != nil {
			out = append(out, s.Name+"="+strconv.FormatInt(s.User.Linux.UID, 10))
		}
	}
	return strings.Join(out, ",")
}
