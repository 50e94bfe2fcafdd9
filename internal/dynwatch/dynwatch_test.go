package dynwatch_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
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

	"github.com/quotakeeper/quotakeeper/internal/dynwatch"
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

// gate holds every request whose path contains path until open is closed,
// and says on held when it holds one.
type gate struct {
	path string
	open chan struct{}
	held chan struct{}
}

func (g *gate) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if strings.Contains(req.URL.Path, g.path) {
			select {
			case g.held <- struct{}{}:
			default:
			}
			select {
			case <-g.open:
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
		return next.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestAKindSlowToSyncHoldsBackOnlyItsOwnCallers: while one kind's informer
// waits for its first list (held here at the transport), a watch of another
// kind returns at once, and a second user of the slow kind waits for the
// same informer rather than starting another. Before, Watch held its lock
// through the sync (up to 30 s) and every other kind waited too.
func TestAKindSlowToSyncHoldsBackOnlyItsOwnCallers(t *testing.T) {
	if env == nil {
		t.Skip("needs a control plane; skipped in -short mode")
	}
	g := &gate{path: "/organizations", open: make(chan struct{}), held: make(chan struct{}, 1)}
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = g.wrap
	ctx, w := startWatchesAs(t, cfg)
	newOrg(t, env.Client, "slow")

	var a, b seen
	slowA, slowB := make(chan error, 1), make(chan error, 1)
	go func() { slowA <- w.Watch(ctx, orgGVK, "a", a.handler()) }()
	select {
	case <-g.held: // a's informer is listing, held at the gate
	case <-time.After(10 * time.Second):
		t.Fatal("the organizations informer never listed")
	}
	go func() { slowB <- w.Watch(ctx, orgGVK, "b", b.handler()) }()

	cmGVK := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	var c seen
	fast := make(chan error, 1)
	started := time.Now()
	go func() { fast <- w.Watch(ctx, cmGVK, "c", c.handler()) }()
	select {
	case err := <-fast:
		if err != nil {
			t.Fatalf("watch of ConfigMaps: %v", err)
		}
	case <-time.After(10 * time.Second):
		close(g.open)
		t.Fatalf("the ConfigMaps watch waited %s for the organizations informer's sync", time.Since(started))
	}
	select {
	case err := <-slowA:
		t.Fatalf("the organizations watch returned (%v) before its list was let through", err)
	case err := <-slowB:
		t.Fatalf("the second organizations watch returned (%v) before its list was let through", err)
	default:
	}
	if got := w.Kinds(); len(got) != 1 || got[0] != cmGVK {
		t.Fatalf("running informers %v, want only ConfigMaps (organizations still syncing)", got)
	}

	close(g.open)
	for name, ch := range map[string]chan error{"a": slowA, "b": slowB} {
		if err := <-ch; err != nil {
			t.Fatalf("organizations watch of %s: %v", name, err)
		}
	}
	if got := w.Users(orgGVK); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("organizations users %v, want [a b] on one informer", got)
	}
	for _, s := range []*seen{&a, &b} {
		testenv.Eventually(t, 10*time.Second, "handler sees the organization", func() error { return s.has("slow") })
	}
	// Reference counting holds across the concurrent start: the informer
	// stops with its last user.
	w.Unwatch(orgGVK, "a")
	w.Unwatch(orgGVK, "b")
	w.Unwatch(cmGVK, "c")
	if got := w.Kinds(); len(got) != 0 {
		t.Fatalf("informers left running: %v", got)
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
