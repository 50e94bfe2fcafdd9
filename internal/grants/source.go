package grants

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Source is a controller source that enqueues, for every pair the mirror
// holds and every pair whose grants change, the requests fn maps it to. It
// is a syncing source: a controller that watches it starts its workers only
// after the mirror has mirrored the informer's initial list, so no
// reconciler writes a limit computed from a half-filled grant set.
func Source[request comparable](m *Mirror, fn func(context.Context, Change) []request) source.TypedSyncingSource[request] {
	return &changeSource[request]{mirror: m, fn: fn}
}

type changeSource[request comparable] struct {
	mirror *Mirror
	fn     func(context.Context, Change) []request
}

func (s *changeSource[request]) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[request]) error {
	cancel := s.mirror.Subscribe(func(c Change) {
		for _, r := range s.fn(ctx, c) {
			queue.Add(r)
		}
	})
	go func() {
		<-ctx.Done()
		cancel()
	}()
	return nil
}

func (s *changeSource[request]) WaitForSync(ctx context.Context) error {
	return WaitForSync(ctx, s.mirror)
}

func (s *changeSource[request]) String() string { return "grant mirror" }

// WaitForSync blocks until m.HasSynced or ctx ends.
func WaitForSync(ctx context.Context, m *Mirror) error {
	return wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return m.HasSynced(), nil
	})
}
