package localcluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

const denyTemplate = `
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8sdenyname
spec:
  crd:
    spec:
      names:
        kind: K8sDenyName
  targets:
  - target: admission.k8s.gatekeeper.sh
    rego: |
      package k8sdenyname
      violation[{"msg": msg}] {
        input.review.object.metadata.name == "forbidden"
        msg := "the name forbidden is forbidden"
      }
`

const denyConstraint = `
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sDenyName
metadata:
  name: deny-forbidden
spec:
  match:
    kinds:
    - apiGroups: [""]
      kinds: ["ConfigMap"]
`

// The test bed itself: a Gatekeeper built with our plugin serves admission
// through the balancer for a real apiserver.
func TestGatekeeperAdmitsThroughBalancer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane and the Gatekeeper build")
	}
	gk := filepath.Join(testenv.RepoRoot(), "bin", "gatekeeper")
	if _, err := os.Stat(gk); err != nil {
		t.Fatalf("%s missing: run 'make gatekeeper'", gk)
	}
	ctx := context.Background()
	c, err := localcluster.Start(ctx, localcluster.Options{Dir: t.TempDir(), Gatekeeper: gk, GatekeeperReplicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()

	for _, doc := range []string{denyTemplate, denyConstraint} {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			err := c.Client.Create(ctx, obj)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("create %s: %v", obj.GetKind(), err)
			}
			time.Sleep(time.Second) // the constraint CRD appears once the template is compiled
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "forbidden", Namespace: "default"}}
		err := c.Client.Create(ctx, cm)
		if err != nil && strings.Contains(err.Error(), "the name forbidden is forbidden") {
			break
		}
		if err == nil {
			_ = c.Client.Delete(ctx, cm)
		}
		if time.Now().After(deadline) {
			t.Fatalf("constraint never enforced; last result: %v", err)
		}
		time.Sleep(time.Second)
	}
	allowed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "allowed", Namespace: "default"}}
	if err := c.Client.Create(ctx, allowed); err != nil {
		t.Fatalf("allowed ConfigMap denied: %v", err)
	}
}

// Load runs report CPU per create from /proc: a process that has burnt CPU
// shows at least that much (getrusage, the kernel's other account of the
// same time, is the reference: no wall-clock budget, which a busy machine
// would break), and one that does not exist is an error.
func TestCPUTime(t *testing.T) {
	rusage := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before, err := localcluster.CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	ruBefore := rusage()
	const burn = 200 * time.Millisecond
	for deadline := time.Now().Add(time.Minute); rusage()-ruBefore < burn && time.Now().Before(deadline); {
	}
	burnt := rusage() - ruBefore
	after, err := localcluster.CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// /proc counts in clock ticks (10 ms) and covers the same threads.
	if got := after - before; got < burnt-20*time.Millisecond {
		t.Errorf("CPU time grew by %v while getrusage counted %v", got, burnt)
	}
	if _, err := localcluster.CPUTime(-1); err == nil {
		t.Error("CPUTime(-1): no error")
	}
}
