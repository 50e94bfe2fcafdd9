package kubestore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledger/kubestore"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// The over-limit index, on a real informer cache: a bucket whose limit is
// lowered below what it holds shows at once, only under its own resource
// type, and leaves it when usage falls back within the limit.
func TestAnyOverLimitFromTheCacheIndex(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := kubestore.IndexOverLimit(ctx, c); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	store := kubestore.New(newClient(t), kubestore.Options{Reader: c, OverLimitIndexed: true})
	grants := ledger.NewGrantSet()
	l := ledger.New(store, grants)

	rt := "test.quotakeeper.io/" + unique("overlimit")
	other := rt + "-other"
	acme := org(unique("overlimit"))
	key := ledger.NewBucketKey(acme, rt, nil)
	setGrant := func(amount int64) {
		t.Helper()
		if err := grants.Set(grant("quotakeeper-system/acme#0", acme, rt, amount)); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Refresh(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	wantOver := func(resourceType string, want bool) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("AnyOverLimit(%s) = %v", resourceType, want), func() error {
			got, err := l.AnyOverLimit(ctx, resourceType)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("got %v", got)
			}
			return nil
		})
	}

	setGrant(3)
	for i := range 2 {
		id := fmt.Sprintf("cm-%d", i)
		d, err := l.Reserve(ctx, ledger.Claim{ID: id, Object: ledger.ObjectRef{Kind: "ConfigMap", Namespace: "default", Name: id, UID: id},
			Requests: []ledger.Request{{Consumer: acme, ResourceType: rt, Amount: 1}}})
		if err != nil || !d.Granted {
			t.Fatalf("reserve %s: %v %v", id, d, err)
		}
	}
	wantOver(rt, false) // reserved 2 of 3

	setGrant(1) // reserved 2 of 1
	wantOver(rt, true)
	wantOver(other, false)

	setGrant(2) // reserved 2 of 2: at the limit is not over
	wantOver(rt, false)

	// Without the index the store cannot tell, and says so.
	blind := kubestore.New(newClient(t), kubestore.Options{Reader: c})
	if got, err := blind.AnyOverLimit(ctx, other); err != nil || !got {
		t.Fatalf("without the index: %v, %v (want true)", got, err)
	}
}
