package faults_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

const (
	resourceType = "faults.quota/configmaps"
	// limit is each scenario's quota: its creators want more (creators ×
	// hold), so the bucket stays at its limit.
	limit = 10
)

// scenarios name the namespaces, one per scenario, each its own consumer
// with its own bucket, so a scenario's leftovers never move another's
// numbers.
var scenarios = []string{"apiserver", "etcd", "manager", "gatekeeper"}

func scenarioNamespace(scenario string) string { return "faults-" + scenario }

var (
	setupOnce sync.Once
	setupErr  error
)

// setup installs, once for the package, the registration, one grant of
// limit per scenario namespace and a QuotaEntity constraint over them, and
// waits until every bucket exists with its limit and every Gatekeeper
// replica enforces the constraint.
func setup(t *testing.T) {
	t.Helper()
	setupOnce.Do(func() { setupErr = install(context.Background()) })
	if setupErr != nil {
		t.Fatal("setup:", setupErr)
	}
}

func install(ctx context.Context) error {
	c := cluster.Client
	var namespaces []any
	for _, s := range scenarios {
		ns := scenarioNamespace(s)
		namespaces = append(namespaces, ns)
		if err := c.Create(ctx, builders.Namespace(ns).Obj()); err != nil {
			return err
		}
	}
	reg := builders.Registration("faults-configmaps", resourceType).Consumer(quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"}).
		Type(quotav1alpha1.RegistrationTypeEntity).BaseUnit("count").ClaimingResources(quotav1alpha1.GroupKind{Kind: "ConfigMap"}).Obj()
	if err := c.Create(ctx, reg); err != nil {
		return err
	}
	if err := localcluster.Poll(ctx, time.Minute, "registration Active", func() error {
		return activeCondition(ctx, reg)
	}); err != nil {
		return err
	}
	for _, s := range scenarios {
		ns := scenarioNamespace(s)
		g := builders.Grant("configmaps", ns).Consumer(consumer(ns)).Allowance(resourceType, limit).Obj()
		if err := c.Create(ctx, g); err != nil {
			return err
		}
		if err := localcluster.Poll(ctx, time.Minute, "grant in "+ns+" Active", func() error {
			return activeCondition(ctx, g)
		}); err != nil {
			return err
		}
	}
	constraint := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "constraints.gatekeeper.sh/v1beta1",
		"kind":       "QuotaEntity",
		"metadata":   map[string]any{"name": "faults"},
		"spec": map[string]any{
			"match": map[string]any{
				"kinds":      []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"ConfigMap"}}},
				"namespaces": namespaces,
			},
			"parameters": map[string]any{"resourceType": resourceType},
		},
	}}
	if err := cluster.Apply(ctx, time.Minute, constraint); err != nil {
		return err
	}
	if err := cluster.WaitEnforced(ctx, 2*time.Minute, constraint.GroupVersionKind(), "faults"); err != nil {
		return err
	}
	for _, s := range scenarios {
		ns := scenarioNamespace(s)
		if err := localcluster.Poll(ctx, time.Minute, "bucket of "+ns, func() error {
			b, err := getBucket(ctx, ns)
			if err == nil && b.Status.Limit != limit {
				err = fmt.Errorf("limit %d", b.Status.Limit)
			}
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

func consumer(ns string) quotav1alpha1.ConsumerRef {
	return quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
}

// bucketKey is the object key of ns's bucket.
func bucketKey(ns string) client.ObjectKey {
	return client.ObjectKey{Namespace: ns, Name: ledger.NewBucketKey(ledgerconv.Consumer(consumer(ns)), resourceType, nil).Name()}
}

func getBucket(ctx context.Context, ns string) (*quotav1alpha1.AllowanceBucket, error) {
	b := &quotav1alpha1.AllowanceBucket{}
	return b, cluster.Client.Get(ctx, bucketKey(ns), b)
}

func activeCondition(ctx context.Context, obj quotav1alpha1.ConditionGetter) error {
	if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return err
	}
	conds := obj.GetConditions()
	if !meta.IsStatusConditionTrue(conds, quotav1alpha1.ConditionActive) {
		return fmt.Errorf("%s not Active: %+v", obj.GetName(), conds)
	}
	return nil
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
