package dynwatch_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
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
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
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
