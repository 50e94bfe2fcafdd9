package localcluster

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
// decide with it.
func (c *Cluster) WaitEnforced(ctx context.Context, timeout time.Duration, gvk schema.GroupVersionKind, name string) error {
	return Poll(ctx, timeout, "constraint "+name+" enforced by every replica", func() error {
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
}
