// Package lockout shows that the values we ship cannot lock a cluster:
// with quotakeeper's manager and every Gatekeeper replica killed, the
// control plane's leases renew, namespaces are created and the manager
// restarts, while quota itself fails closed. The scenario is here; its
// test packages run it on a cluster of their own per admission mode
// (test/lockout/builtins, test/lockout/stock), installed with the shipped
// Gatekeeper values alone (no opt-in rules) and no namespace labelled
// beforehand, since it kills every webhook backend.
package lockout

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

const (
	gatekeeperWebhook = `failed calling webhook "validation.gatekeeper.sh"`
	guardWebhook      = `failed calling webhook "vnamespace-consumer-labels.quota.miloapis.com"`
	consumerLabel     = "resourcemanager.miloapis.com/organization"
)

// QuotaDownLocksNothingButQuota is the scenario (issue 24's "done when"),
// run on cluster in either admission mode: with the manager and every
// Gatekeeper replica killed, a kube-system component keeps renewing its leader Lease, a node
// heartbeat Lease and kube-system's Events and ConfigMaps are written, a
// namespace without a consumer label is created, and the manager restarts
// and serves again; meanwhile what quota guards fails closed: a tenant's
// ConfigMap and a namespace naming a consumer are refused.
func QuotaDownLocksNothingButQuota(t *testing.T, cluster *localcluster.Cluster) {
	ctx := context.Background()
	c := cluster.Client
	// While everything runs: a tenant namespace and a ConfigMap in it go
	// through both webhooks.
	tenant := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Labels: map[string]string{consumerLabel: "acme"}}}
	if err := c.Create(ctx, tenant); err != nil {
		t.Fatalf("create namespace tenant with everything up: %v", err)
	}
	if err := c.Create(ctx, configMap("tenant", "before")); err != nil {
		t.Fatalf("create a ConfigMap in tenant with everything up: %v", err)
	}

	cluster.Manager.Kill()
	for _, gk := range cluster.Gatekeepers {
		gk.Kill()
	}
	t.Cleanup(func() {
		for _, gk := range cluster.Gatekeepers {
			if !gk.Running() {
				_ = cluster.Restart(ctx, gk)
			}
		}
	})

	// Quota fails closed: Gatekeeper's webhook refuses what it cannot judge.
	err := c.Create(ctx, configMap("tenant", "during"))
	if err == nil || !strings.Contains(err.Error(), gatekeeperWebhook) {
		t.Fatalf("a tenant's ConfigMap with Gatekeeper down: got %v, want a failure calling %s", err, gatekeeperWebhook)
	}
	// So does the namespace guard, for a namespace that names a consumer.
	err = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "named", Labels: map[string]string{consumerLabel: "acme"}}})
	if err == nil || !strings.Contains(err.Error(), gatekeeperWebhook) && !strings.Contains(err.Error(), guardWebhook) {
		t.Fatalf("a namespace naming a consumer with quota down: got %v, want a webhook failure", err)
	}

	cs := kubernetes.NewForConfigOrDie(cluster.Config)
	t.Run("kube-system leader election renews its Lease", func(t *testing.T) {
		renewals := renewLeader(t, cs, "kube-system", "kube-scheduler", 3)
		if renewals < 3 {
			t.Fatalf("renewed %d times, want 3", renewals)
		}
	})
	t.Run("a node heartbeat Lease in kube-node-lease", func(t *testing.T) {
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease"},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-1"), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &metav1.MicroTime{Time: time.Now()}},
		}
		if err := c.Create(ctx, lease); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			if err := c.Update(ctx, lease); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("a Lease and an Event in a tenant namespace", func(t *testing.T) {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "app-leader", Namespace: "tenant"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("app-0")}}
		if err := c.Create(ctx, lease); err != nil {
			t.Fatal(err)
		}
		event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "app.1", Namespace: "tenant"},
			InvolvedObject: corev1.ObjectReference{Kind: "Lease", Namespace: "tenant", Name: "app-leader"}, Reason: "LeaderElection", Message: "app-0 became leader", Type: corev1.EventTypeNormal}
		if err := c.Create(ctx, event); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("kube-system objects", func(t *testing.T) {
		if err := c.Create(ctx, configMap("kube-system", "extension-apiserver-authentication-2")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a namespace without a consumer label", func(t *testing.T) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring", Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "privileged", "app.kubernetes.io/part-of": "monitoring"}}}
		if err := c.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		ns.Labels["pod-security.kubernetes.io/warn"] = "baseline"
		if err := c.Update(ctx, ns); err != nil {
			t.Fatalf("relabel a namespace's pod security: %v", err)
		}
	})
	t.Run("the manager restarts", func(t *testing.T) {
		if err := cluster.Restart(ctx, cluster.Manager); err != nil {
			t.Fatalf("restart the manager with every Gatekeeper replica down: %v", err)
		}
		// It serves while Gatekeeper stays down: its registration webhook
		// judges a registration (quota objects never reach Gatekeeper).
		reg := &quotav1alpha1.ResourceRegistration{
			ObjectMeta: metav1.ObjectMeta{Name: "groups"},
			Spec: quotav1alpha1.ResourceRegistrationSpec{
				ConsumerTypeRef:   quotav1alpha1.ConsumerTypeRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Group"},
				ClaimingResources: []quotav1alpha1.GroupKind{{Kind: "ConfigMap"}},
				Type:              quotav1alpha1.RegistrationTypeEntity, ResourceType: "example.com/things", BaseUnit: "things", DisplayUnit: "things", UnitConversionFactor: 1,
			},
		}
		err := c.Create(ctx, reg)
		want := `spec.consumerTypeRef.apiGroup: Invalid value: "rbac.authorization.k8s.io": the consumer label rbac.authorization.k8s.io/group would lie in a domain Kubernetes reserves (kubernetes.io, k8s.io), which the namespace guard does not see; a consumer kind needs an API group of its own`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("a registration judged by the restarted manager: got %v, want %s", err, want)
		}
	})
	t.Run("Gatekeeper restarts and quota decides again", func(t *testing.T) {
		for _, gk := range cluster.Gatekeepers {
			if err := cluster.Restart(ctx, gk); err != nil {
				t.Fatal(err)
			}
		}
		testenv.Eventually(t, time.Minute, "a tenant's ConfigMap is admitted", func() error {
			return c.Create(ctx, configMap("tenant", "after"))
		})
	})
}

func configMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
}

// renewLeader runs client-go's leader election in namespace for a Lease
// named name, as kube-scheduler and kube-controller-manager do, and returns
// how many times the leader renewed it (its renewTime moved) before want
// renewals or 30 s. Leadership lost on the way fails the test: a renewal
// was refused.
func renewLeader(t *testing.T, cs kubernetes.Interface, namespace, name string, want int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "lockout-test"},
	}
	var lost atomic.Bool
	leading := make(chan struct{})
	go leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: 4 * time.Second,
		RenewDeadline: 3 * time.Second,
		RetryPeriod:   500 * time.Millisecond,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(leading) },
			OnStoppedLeading: func() { lost.Store(ctx.Err() == nil) },
		},
		ReleaseOnCancel: true,
	})
	select {
	case <-leading:
	case <-ctx.Done():
		t.Fatalf("never became leader of Lease %s/%s", namespace, name)
	}
	var last time.Time
	renewals := 0
	for renewals < want && ctx.Err() == nil {
		var lease coordinationv1.Lease
		got, err := cs.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			lease = *got
			if rt := lease.Spec.RenewTime; rt != nil && rt.After(last) {
				if !last.IsZero() {
					renewals++
				}
				last = rt.Time
			}
		}
		if lost.Load() {
			t.Fatalf("lost the leadership of Lease %s/%s: a renewal was refused", namespace, name)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return renewals
}
