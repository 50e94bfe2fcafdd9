// Package node runs our images on a real node joined to a local control
// plane (test/nodebed): `make node-e2e`. It needs root and changes the host's
// network while it runs, so it runs only when QUOTAKEEPER_NODE_ASSETS names
// the node's binaries (make node-bin); make test skips it.
package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quotakeeper/quotakeeper/internal/checkout"
	"github.com/quotakeeper/quotakeeper/test/nodebed"
)

// The environment make node-e2e passes.
const (
	assetsEnv    = "QUOTAKEEPER_NODE_ASSETS"           // make node-bin's directory of binaries
	imagesEnv    = "QUOTAKEEPER_NODE_IMAGES"           // make images' _output/images
	pauseEnv     = "QUOTAKEEPER_NODE_PAUSE"            // the sandbox image's tarball
	dnsEnv       = "QUOTAKEEPER_NODE_COREDNS"          // the cluster DNS's image tarball
	stockEnv     = "QUOTAKEEPER_NODE_GATEKEEPER_STOCK" // stock Gatekeeper's image tarball
	releaseEnv   = "QUOTAKEEPER_NODE_RELEASE"          // optional: make release's _output/release
	stockRelease = "v3.23.1"                           // the Gatekeeper release of stockEnv's image
)

// Our images, as make images names their tarballs and make release its
// layouts.
const (
	managerImage    = "quotakeeper-manager"
	gatekeeperImage = "gatekeeper-quotakeeper"
)

// imageSource is where the node imports our image name from: the
// release's OCI layout (make release) when releaseEnv is set, else make
// images' tarball.
func imageSource(name string) string {
	if release := os.Getenv(releaseEnv); release != "" {
		return filepath.Join(release, "images", name)
	}
	return filepath.Join(os.Getenv(imagesEnv), name+".tar")
}

// nonroot is the user our images run as (hack/tools/images).
const nonroot = 65532

var bed *nodebed.Bed

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	assets := os.Getenv(assetsEnv)
	if assets == "" {
		fmt.Printf("skipping the real-node suite: %s is not set (make node-e2e sets it)\n", assetsEnv)
		return 0
	}
	if os.Geteuid() != 0 {
		fmt.Println("the real-node suite needs root: the kubelet, containerd and runc do")
		return 1
	}
	testbin, err := checkout.Testbin()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	dir, err := os.MkdirTemp("", "quotakeeper-node-")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	opts := nodebed.Options{
		Dir:     dir,
		Testbin: testbin,
		Assets:  assets,
		Pause:   os.Getenv(pauseEnv),
		DNS:     os.Getenv(dnsEnv),
		Images:  []string{imageSource(managerImage), imageSource(gatekeeperImage), os.Getenv(stockEnv)},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	if bed, err = nodebed.Start(ctx, opts); err != nil {
		fmt.Printf("node bed: %v\nlogs in %s\n", err, dir)
		return 1
	}
	fmt.Printf("node %s Ready, kube-proxy and cluster DNS answering, %s after start; logs in %s; admin kubeconfig %s\n",
		nodebed.NodeName, time.Since(start).Round(time.Second), dir, bed.Kubeconfig)
	for image, ref := range bed.Images {
		fmt.Printf("imported %s as %s\n", image, ref)
	}
	fmt.Printf("kube-proxy programs the Services; %s.default.svc.%s resolves to %s through kube-dns at %s\n",
		"kubernetes", nodebed.ClusterDomain, nodebed.APIServerAddress, nodebed.DNSServiceIP)
	code := m.Run()
	bed.Stop()
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Printf("logs kept in %s\n", dir)
	}
	return code
}

// imageOf is the reference our image name was imported as.
func imageOf(t *testing.T, name string) string {
	t.Helper()
	ref, ok := bed.Images[imageSource(name)]
	if !ok {
		t.Fatalf("image %s was not imported", name)
	}
	return ref
}

// stockImage is the reference stock Gatekeeper's image was imported as.
func stockImage(t *testing.T) string {
	t.Helper()
	ref, ok := bed.Images[os.Getenv(stockEnv)]
	if !ok {
		t.Fatalf("stock Gatekeeper's image %s was not imported", os.Getenv(stockEnv))
	}
	return ref
}

// TestRealNode runs our images on the node: first the manager's image in
// a pod of its own, then both charts as docs/operations.md installs them.
// In that order: once Gatekeeper's webhook is installed, a namespace's
// kube-root-ca.crt waits for it (ConfigMaps are in its rules and it fails
// closed), and with it every pod of a new namespace.
//
// Then what a platform team meets on day one, each step on the state the
// one before left (so the first failure ends the test): quota decided by
// Gatekeeper's pods, exact to the message; every manager pod killed and
// rescheduled; Gatekeeper's webhook Deployment rolled; helm upgrade with a
// changed value; the release's objects byte for byte what helm template
// renders; and helm uninstall, as documented, leaving no webhook,
// finalizer, CRD or namespace behind.
//
// Then the other admission mode on the cluster that uninstall left: stock
// Gatekeeper's chart and image and ours with admission=externalData, as
// docs/operations.md#stock-gatekeeper-external-data installs them; stock
// Gatekeeper's pods call the manager's provider by its Service's DNS name
// (cluster DNS, kube-proxy), and decide the same round exactly, before and
// after every manager pod is killed.
func TestRealNode(t *testing.T) {
	for _, step := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"the manager's image runs as nonroot with a pod IP", testManagerImageRunsAsNonrootWithAPodIP},
		{"both charts install as documented", testChartsInstallAsDocumented},
		{"the manager's metrics need a reader's token", testMetricsNeedAToken},
		{"Gatekeeper's pods decide quota exactly", testAdmissionThroughThePods},
		{"the manager's pods killed and rescheduled", testManagerPodsKilledAndRescheduled},
		{"Gatekeeper rolled", testGatekeeperRolled},
		{"helm upgrade with a changed value", testHelmUpgradeWithAChangedValue},
		{"the release is what helm template renders", testInstalledIsWhatHelmTemplateRenders},
		{"helm uninstall leaves nothing stuck", testHelmUninstallLeavesNothingStuck},
		{"stock Gatekeeper and the External Data mode install as documented", testStockChartsInstallAsDocumented},
		{"stock Gatekeeper's pods decide quota exactly through the provider", testAdmissionThroughThePods},
		{"the manager's pods killed and rescheduled under stock Gatekeeper", testManagerPodsKilledAndRescheduled},
	} {
		start := time.Now()
		ok := t.Run(step.name, step.run)
		t.Logf("%s: %s, %s", step.name, map[bool]string{true: "passed", false: "FAILED"}[ok], time.Since(start).Round(time.Second))
		if !ok {
			t.Fatalf("stopping after %q: the steps after it build on what it leaves", step.name)
		}
	}
}

// testManagerImageRunsAsNonrootWithAPodIP runs the manager's image as a pod
// (its --version) and checks what the node did with it: scheduled to the
// node, an IP of the pod network, the image's user, and its output read
// back through the apiserver from the kubelet.
func testManagerImageRunsAsNonrootWithAPodIP(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "image")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "manager-version", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:            "manager",
				Image:           imageOf(t, managerImage),
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"--version"},
			}},
		},
	}
	pods := bed.Clientset.CoreV1().Pods(ns)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, ns, pod.Name, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	t.Logf("pod %s/%s: node %s, IP %s, phase %s", ns, got.Name, got.Spec.NodeName, got.Status.PodIP, got.Status.Phase)
	if got.Spec.NodeName != nodebed.NodeName {
		t.Errorf("pod ran on %q, want %s", got.Spec.NodeName, nodebed.NodeName)
	}
	if !inPodCIDR(got.Status.PodIP) {
		t.Errorf("pod IP %q is not in %s", got.Status.PodIP, nodebed.PodCIDR)
	}
	status := got.Status.ContainerStatuses[0]
	if status.User == nil || status.User.Linux == nil {
		t.Errorf("the runtime reported no user of container %s", status.Name)
	} else if status.User.Linux.UID != nonroot || status.User.Linux.GID != nonroot {
		t.Errorf("container %s ran as %d:%d, want %d:%d", status.Name, status.User.Linux.UID, status.User.Linux.GID, nonroot, nonroot)
	} else {
		t.Logf("container %s ran as %d:%d", status.Name, status.User.Linux.UID, status.User.Linux.GID)
	}
	logs, err := pods.GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs through the apiserver: %v", err)
	}
	// The binary the image holds was built for the image's version (make
	// images and make release stamp both with one VERSION).
	if _, tag, _ := strings.Cut(pod.Spec.Containers[0].Image, ":"); !strings.Contains(string(logs), tag) {
		t.Errorf("the manager's --version printed %q, not the image's tag %s", logs, tag)
	}
	t.Logf("its output, read from the kubelet through the apiserver: %s", logs)
}

// requireDocsSay fails the test unless docs/operations.md's section under
// "### <heading>" still holds each of cmds: the commands the test runs are
// the ones the docs tell users to run.
func requireDocsSay(t *testing.T, heading string, cmds []string) {
	t.Helper()
	root, err := checkout.Root()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(docs), "\n### "+heading+"\n")
	section, _, _ = strings.Cut(section, "\n### ")
	for _, cmd := range cmds {
		if !strings.Contains(section, cmd) {
			t.Fatalf("docs/operations.md, section %q, no longer says %q, which this test runs", heading, cmd)
		}
	}
}

func createNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := bed.Clientset.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// waitPod waits until done holds for the pod, and fails with its last
// status otherwise.
func waitPod(t *testing.T, ns, name string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := bed.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		return done(p), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: %v; last status: %+v", ns, name, err, pod.Status)
	}
	return pod
}

func inPodCIDR(ip string) bool {
	_, cidr, err := net.ParseCIDR(nodebed.PodCIDR)
	return err == nil && cidr.Contains(net.ParseIP(ip))
}
