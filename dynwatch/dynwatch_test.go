package dynwatch_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/quotakeeper/quotakeeper/dynwatch"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

var orgGVK = schema.GroupVersionKind{Group: "resourcemanager.miloapis.com", Version: "v1alpha1", Kind: "Organization"}

// seen records the names a handler was called with.
type seen struct {
	mu    sync.Mutex
	names []string
}

func (s *seen) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.names = append(s.names, obj.(*unstructured.Unstructured).GetName())
	}}
}

func (s *seen) has(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.names, name) {
		return fmt.Errorf("saw %v, not %s", s.names, name)
	}
	return nil
}

func newOrg(t *testing.T, c client.Client, name string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(orgGVK)
	u.SetName(name)
	if err := c.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

// TestLastUserStopsTheInformer: two users share one informer; the first to
// leave stops only its handler, the last stops the informer, and its watch on
// the API server ends. Watching again starts a new informer.
func TestLastUserStopsTheInformer(t *testing.T) {
	ctx, w := startWatches(t)

	watchers := func(want int) {
		t.Helper()
		testenv.WaitWatchers(ctx, t, 30*time.Second, env.Config, orgGVK.Group, "organizations", want)
	}
	watchers(0)
	newOrg(t, env.Client, "before")

	var a, b seen
	if err := w.Watch(ctx, orgGVK, "a", a.handler()); err != nil {
		t.Fatal(err)
	}
	if err := w.Watch(ctx, orgGVK, "b", b.handler()); err != nil {
		t.Fatal(err)
	}
	if got := w.Users(orgGVK); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("users %v, want [a b]", got)
	}
	watchers(1)
	// A handler added to a running informer is told about what it holds.
	testenv.Eventually(t, 10*time.Second, "b sees the existing organization", func() error { return b.has("before") })

	w.Unwatch(orgGVK, "a")
	newOrg(t, env.Client, "after-a")
	testenv.Eventually(t, 10*time.Second, "b sees a new organization", func() error { return b.has("after-a") })
	if err := a.has("after-a"); err == nil {
		t.Fatal("a's handler was called after a unwatched")
	}
	watchers(1)
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(orgGVK.GroupVersion().WithKind("OrganizationList"))
	if err := w.Reader().List(ctx, list); err != nil || len(list.Items) != 2 {
		t.Fatalf("list from the informer: %d items, %v; want 2", len(list.Items), err)
	}

	w.Unwatch(orgGVK, "b")
	if got := w.Kinds(); len(got) != 0 {
		t.Fatalf("kinds %v after the last user left, want none", got)
	}
	watchers(0)
	if err := w.Reader().List(ctx, list); err == nil {
		t.Fatal("reading a kind nobody watches succeeded; want an error")
	}

	var c seen
	if err := w.Watch(ctx, orgGVK, "c", c.handler()); err != nil {
		t.Fatal(err)
	}
	watchers(1)
	testenv.Eventually(t, 10*time.Second, "c sees every organization", func() error { return c.has("after-a") })
}

// TestWatchOfAnUnservedKindFails: a kind the API server does not serve is
// an error, and leaves nothing running.
func TestWatchOfAnUnservedKindFails(t *testing.T) {
	ctx, w := startWatches(t)

	gvk := schema.GroupVersionKind{Group: "nowhere.example.com", Version: "v1", Kind: "Widget"}
	var s seen
	if err := w.Watch(ctx, gvk, "a", s.handler()); err == nil {
		t.Fatal("watching an unserved kind succeeded")
	}
	if got := w.Kinds(); len(got) != 0 {
		t.Fatalf("kinds %v after a failed watch, want none", got)
	}
}

var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	var err error
	if env, err = testenv.Start(testenv.TestCRDs()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// startWatches runs a manager of the test's own with Watches in it, until
// the test ends.
func startWatches(t *testing.T) (context.Context, *dynwatch.Watches) {
	t.Helper()
	if env == nil {
		t.Skip("needs a control plane; skipped in -short mode")
	}
	return startWatchesAs(t, env.Config)
}

// startWatchesAs runs Watches in a manager with cfg's credentials.
func startWatchesAs(t *testing.T, cfg *rest.Config) (context.Context, *dynwatch.Watches) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	w, err := dynwatch.New(mgr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return ctx, w
}

// TestWatchOfAKindItMayNotReadFailsAtOnce: a kind RBAC does not let the
// process read is refused before any informer starts (one would retry its
// list until the sync timeout), with the permission to add; once a
// ClusterRole grants it, the same watch starts.
func TestWatchOfAKindItMayNotReadFailsAtOnce(t *testing.T) {
	if env == nil {
		t.Skip("needs a control plane; skipped in -short mode")
	}
	const user = "dynwatch-reader"
	kubeconfig, err := env.Kubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, w := startWatchesAs(t, cfg)
	var s seen
	start := time.Now()
	err = w.Watch(ctx, orgGVK, "a", s.handler())
	var forbidden *dynwatch.ForbiddenError
	if !errors.As(err, &forbidden) {
		t.Fatalf("watch of a kind it may not read: got %v, want a ForbiddenError", err)
	}
	want := `watch resourcemanager.miloapis.com/v1alpha1, Kind=Organization: the manager may not get, list, watch organizations.resourcemanager.miloapis.com: add a ClusterRole labelled quota.miloapis.com/aggregate-to-manager="true" granting get, list and watch on it (it aggregates into quotakeeper-manager-counted-kinds)`
	if err.Error() != want {
		t.Fatalf("error:\n%s\nwant:\n%s", err, want)
	}
	if waited := time.Since(start); waited >= dynwatch.DefaultSyncTimeout {
		t.Fatalf("refused after %s: waited for the informer", waited)
	}
	if got := w.Kinds(); len(got) != 0 {
		t.Fatalf("informers left running: %v", got)
	}

	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "dynwatch-read-organizations"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{orgGVK.Group}, Resources: []string{"organizations"}, Verbs: []string{"get", "list", "watch"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dynwatch-read-organizations"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	newOrg(t, env.Client, "readable")
	// The authorizer sees the new binding once its own informer has it.
	testenv.Eventually(t, 30*time.Second, "watch once RBAC grants the kind", func() error {
		return w.Watch(ctx, orgGVK, "a", s.handler())
	})
	testenv.Eventually(t, 10*time.Second, "handler sees the organization", func() error { return s.has("readable") })
}
