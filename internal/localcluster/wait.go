package localcluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/counted"
)

// Poll calls cond every 250 ms until it returns nil, and returns cond's last
// error, saying what was awaited, once timeout has passed or ctx's error
// when ctx ends first.
func Poll(ctx context.Context, timeout time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: still not true after %s: %w", what, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// WaitEnforced waits until every Gatekeeper replica reports the constraint
// of kind gvk and name enforced (status.byPod): only then does every replica
// decide with it; then until the manager has counted under it
// (WaitCounted).
func (c *Cluster) WaitEnforced(ctx context.Context, timeout time.Duration, gvk schema.GroupVersionKind, name string) error {
	err := Poll(ctx, timeout, "constraint "+name+" enforced by every replica", func() error {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(gvk)
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			return err
		}
		byPod, _, _ := unstructured.NestedSlice(got.Object, "status", "byPod")
		enforced := 0
		for _, p := range byPod {
			if m, ok := p.(map[string]any); ok {
				if e, _, _ := unstructured.NestedBool(m, "enforced"); e {
					enforced++
				}
			}
		}
		if enforced < len(c.Gatekeepers) {
			return fmt.Errorf("enforced by %d of %d replicas", enforced, len(c.Gatekeepers))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.WaitCounted(ctx, timeout, gvk, name)
}

// stampedKinds are the constraint kinds the manager's webhook gives a
// policy version (package counted); others have one only once the
// observer has counted them, and a kind of no quota template never.
var stampedKinds = []string{"QuotaEntity", "QuotaAllocation", "QuotaClaimPolicy"}

// WaitCounted waits until the manager has published the constraint's
// current policy version (package counted): until then quota.reserve
// denies what it charges as being recounted. A constraint with no version
// of a kind the webhook does not stamp is no quota constraint: nothing to
// wait for.
func (c *Cluster) WaitCounted(ctx context.Context, timeout time.Duration, gvk schema.GroupVersionKind, name string) error {
	err := Poll(ctx, timeout, "constraint "+name+" counted by the manager", func() error {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(gvk)
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			return err
		}
		version := counted.Stamped(got)
		if version == "" {
			if slices.Contains(stampedKinds, gvk.Kind) {
				return fmt.Errorf("no parameters.%s", counted.Field)
			}
			return nil
		}
		cm := &corev1.ConfigMap{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: quotav1alpha1.DefaultSystemNamespace, Name: counted.ConfigMapName}, cm); err != nil {
			return err
		}
		if !counted.Record(cm.Data).Has(version) {
			return fmt.Errorf("version %s not published", version)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Gatekeeper's replicas read the record through a watch: give it the
	// moment a watch event takes on loopback.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(500 * time.Millisecond):
	}
	return nil
}
