// Package dynwatch runs informers for kinds that are only known at run time
// (the trigger and parent kinds of GrantCreationPolicies), and stops them
// when nobody needs them any more.
//
// The informers live in a cache of their own, not the manager's: removing an
// informer from a shared cache would stop it under every controller reading
// that kind, and a handler removed from an informer someone else still uses
// would leave the watch running. Here each kind has a set of named handlers
// ("users"); the first one starts the kind's informer, the last one to leave
// stops it, and its watch on the API server ends.
package dynwatch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// DefaultSyncTimeout bounds how long Watch waits for a new informer's first
// list. A kind the manager may not list never syncs; waiting forever would
// hold the caller's worker.
const DefaultSyncTimeout = 30 * time.Second

// Watches holds the informers of the kinds being watched.
type Watches struct {
	cache       cache.Cache
	client      client.Client // access reviews
	mapper      meta.RESTMapper
	syncTimeout time.Duration

	mu    sync.Mutex
	kinds map[schema.GroupVersionKind]*kindWatch
}

// kindWatch is one kind's informer and the handlers its users added. It is
// in Watches.kinds from the moment its informer starts: until ready is
// closed it has no informer, and callers wanting the kind wait on ready
// without the lock, so that a kind that is slow to sync (up to syncTimeout)
// holds back only its own callers, not every other kind's.
type kindWatch struct {
	ready    chan struct{} // closed once the start below is over
	informer cache.Informer
	err      error // why the start failed; the kind is then gone from kinds
	// abandoned: the start failed because its caller's context ended, which
	// says nothing about the kind; a caller waiting on it starts again.
	abandoned bool
	users     map[string]toolscache.ResourceEventHandlerRegistration
}

// New returns Watches whose cache the manager runs (on every replica: until
// a user adds a handler it holds no informer). Objects are cached without
// their managedFields.
func New(mgr manager.Manager) (*Watches, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(),
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		// Reading a kind nobody watches is a bug here, not a reason to
		// start an informer nothing would stop.
		ReaderFailOnMissingInformer: true,
		DefaultTransform:            cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, fmt.Errorf("dynwatch cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	return &Watches{cache: c, client: mgr.GetClient(), mapper: mgr.GetRESTMapper(), syncTimeout: DefaultSyncTimeout, kinds: map[schema.GroupVersionKind]*kindWatch{}}, nil
}

// Reader reads the watched kinds as *unstructured.Unstructured (and
// UnstructuredList) from the informers. Reading a kind that is not watched
// fails.
func (w *Watches) Reader() client.Reader { return w.cache }

// Watch adds user's handler to gvk's informer, starting the informer if it
// is the kind's first user, and returns once the informer has synced. A user
// already watching gvk keeps its first handler. The handler receives
// *unstructured.Unstructured objects (a deletion may be a
// toolscache.DeletedFinalStateUnknown); once added, it is called with an
// add for every object already cached.
func (w *Watches) Watch(ctx context.Context, gvk schema.GroupVersionKind, user string, h toolscache.ResourceEventHandler) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		k := w.kinds[gvk]
		if k == nil {
			// The first caller starts the informer, with the lock released
			// while it syncs.
			k = &kindWatch{ready: make(chan struct{}), users: map[string]toolscache.ResourceEventHandlerRegistration{}}
			w.kinds[gvk] = k
			w.mu.Unlock()
			inf, err := w.start(ctx, gvk)
			w.mu.Lock()
			k.informer, k.err, k.abandoned = inf, err, err != nil && ctx.Err() != nil
			close(k.ready)
			if err != nil {
				delete(w.kinds, gvk)
				return err
			}
		} else if k.informer == nil {
			// Another caller is starting it: wait for that, then look again
			// (the start may have failed, or the informer stopped since).
			w.mu.Unlock()
			select {
			case <-k.ready:
			case <-ctx.Done():
				w.mu.Lock()
				return fmt.Errorf("watch %s: waiting for its informer to sync: %w", gvk, ctx.Err())
			}
			w.mu.Lock()
			// Any failure but an abandoned start (forbidden, unserved, no
			// sync within the timeout) is this caller's answer too.
			if k.err != nil && !k.abandoned {
				return k.err
			}
			continue
		}
		return w.addUser(k, gvk, user, h)
	}
}

// addUser adds user's handler to k's running informer (w.mu held). A user
// already watching keeps its first handler.
func (w *Watches) addUser(k *kindWatch, gvk schema.GroupVersionKind, user string, h toolscache.ResourceEventHandler) error {
	if _, ok := k.users[user]; ok {
		return nil
	}
	reg, err := k.informer.AddEventHandler(h)
	if err != nil {
		if len(k.users) == 0 {
			w.stop(gvk)
		}
		return fmt.Errorf("watch %s: %w", gvk, err)
	}
	k.users[user] = reg
	return nil
}

// start gets gvk's informer from the cache, which starts it, and waits for
// its first list; an informer that does not sync is stopped again. A kind
// this process may not read is refused before any informer starts, with
// the permission to add (a *ForbiddenError).
func (w *Watches) start(ctx context.Context, gvk schema.GroupVersionKind) (cache.Informer, error) {
	mapping, err := w.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", gvk, err)
	}
	if err := CheckRead(ctx, w.client, mapping); err != nil {
		return nil, fmt.Errorf("watch %s: %w", gvk, err)
	}
	ctx, cancel := context.WithTimeout(ctx, w.syncTimeout)
	defer cancel()
	inf, err := w.cache.GetInformer(ctx, object(gvk))
	if err != nil {
		// A timed-out wait leaves the informer in the cache, retrying.
		_ = w.cache.RemoveInformer(context.Background(), object(gvk))
		return nil, fmt.Errorf("watch %s: %w", gvk, err)
	}
	return inf, nil
}

// Unwatch removes user's handler from gvk's informer, and stops the
// informer when no user is left. Unwatching what is not watched does nothing.
func (w *Watches) Unwatch(gvk schema.GroupVersionKind, user string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := w.kinds[gvk]
	if k == nil || k.informer == nil {
		return // not watched, or still starting (and so without users)
	}
	reg, ok := k.users[user]
	if !ok {
		return
	}
	// The informer stops below if this was its last user; otherwise the
	// handler must go on its own.
	_ = k.informer.RemoveEventHandler(reg)
	delete(k.users, user)
	if len(k.users) == 0 {
		w.stop(gvk)
	}
}

func (w *Watches) stop(gvk schema.GroupVersionKind) {
	// RemoveInformer of the informer cache never fails for an
	// unstructured object with its kind set.
	_ = w.cache.RemoveInformer(context.Background(), object(gvk))
	delete(w.kinds, gvk)
}

// Kinds returns the kinds with a running informer (not those still
// starting), sorted.
func (w *Watches) Kinds() []schema.GroupVersionKind {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]schema.GroupVersionKind, 0, len(w.kinds))
	for gvk, k := range w.kinds {
		if k.informer != nil {
			out = append(out, gvk)
		}
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Users returns the users of gvk's informer, sorted.
func (w *Watches) Users(gvk schema.GroupVersionKind) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := w.kinds[gvk]
	if k == nil {
		return nil
	}
	out := make([]string, 0, len(k.users))
	for u := range k.users {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

func object(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}
