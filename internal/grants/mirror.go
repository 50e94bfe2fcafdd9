package grants

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// Change names a consumer and resource type whose grants changed: every
// bucket of that pair may need its limit recomputed.
type Change struct {
	Consumer     ledger.Consumer
	ResourceType string
}

// Mirror is a ledger.GrantSource fed by a ResourceGrant informer.
type Mirror struct {
	// mu makes replacing one object's grants atomic for readers: the
	// GrantSet locks per call, and an object's old IDs are deleted and its
	// new ones set in two calls.
	mu      sync.RWMutex
	set     *ledger.GrantSet
	objects map[types.NamespacedName]mirrored

	subMu   sync.Mutex
	subs    map[int]func(Change)
	nextSub int

	registration toolscache.ResourceEventHandlerRegistration
}

// mirrored is what the mirror holds for one ResourceGrant object.
type mirrored struct {
	grants []ledger.Grant
	print  string // identity of the amounts, to skip no-op updates
}

var _ ledger.GrantSource = (*Mirror)(nil)

// NewMirror returns an empty Mirror; Register connects it to an informer.
func NewMirror() *Mirror {
	return &Mirror{set: ledger.NewGrantSet(), objects: map[types.NamespacedName]mirrored{}, subs: map[int]func(Change){}}
}

// Register adds the mirror's event handler to the ResourceGrant informer of
// informers (a manager's cache). Call it before the cache starts or after;
// HasSynced turns true once the informer's initial list has been mirrored.
func (m *Mirror) Register(ctx context.Context, informers cache.Informers) error {
	inf, err := informers.GetInformer(ctx, &quotav1alpha1.ResourceGrant{})
	if err != nil {
		return fmt.Errorf("grant informer: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, _ bool) { m.observe(obj) },
		UpdateFunc: func(_, obj any) { m.observe(obj) },
		DeleteFunc: m.forget,
	})
	if err != nil {
		return fmt.Errorf("grant informer handler: %w", err)
	}
	m.mu.Lock()
	m.registration = reg
	m.mu.Unlock()
	return nil
}

// HasSynced reports whether every grant of the informer's initial list has
// been mirrored. Before that the mirror under-reports limits, so anything
// that decides quota must wait (controllers do, through Source) or fail
// closed.
func (m *Mirror) HasSynced() bool {
	m.mu.RLock()
	reg := m.registration
	m.mu.RUnlock()
	return reg != nil && reg.HasSynced()
}

// GrantsFor implements ledger.GrantSource.
func (m *Mirror) GrantsFor(c ledger.Consumer, resourceType string) []ledger.Grant {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.set.GrantsFor(c, resourceType)
}

// Changes returns every consumer and resource type the mirror holds grants
// for, sorted, so a new subscriber can start from the whole picture.
func (m *Mirror) Changes() []Change {
	m.mu.RLock()
	defer m.mu.RUnlock()
	seen := map[Change]bool{}
	for _, o := range m.objects {
		for _, g := range o.grants {
			seen[Change{g.Consumer, g.ResourceType}] = true
		}
	}
	return sortedChanges(seen)
}

// Subscribe calls fn for every pair the mirror holds now and, until cancel
// is called, for every pair whose grants change. fn runs on the informer's
// goroutine: it must not block (enqueue and return).
func (m *Mirror) Subscribe(fn func(Change)) (cancel func()) {
	m.subMu.Lock()
	id := m.nextSub
	m.nextSub++
	m.subs[id] = fn
	m.subMu.Unlock()
	// Registered before the snapshot, so a change racing with it is seen
	// twice rather than never.
	for _, c := range m.Changes() {
		fn(c)
	}
	return func() {
		m.subMu.Lock()
		delete(m.subs, id)
		m.subMu.Unlock()
	}
}

// Evaluated reports whether the grant's Active condition describes its
// current generation: the grant controller has judged this spec.
func Evaluated(obj *quotav1alpha1.ResourceGrant) bool {
	return quotav1alpha1.IsCurrent(obj.Status.Conditions, quotav1alpha1.ConditionActive, obj.Generation)
}

// Active reports whether the grant counts toward limits: Active=True for its
// current generation.
func Active(obj *quotav1alpha1.ResourceGrant) bool {
	return quotav1alpha1.IsTrue(obj.Status.Conditions, quotav1alpha1.ConditionActive, obj.Generation)
}

func (m *Mirror) observe(obj any) {
	g, ok := obj.(*quotav1alpha1.ResourceGrant)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: g.Namespace, Name: g.Name}
	switch {
	case !Evaluated(g):
		// Not judged yet: keep what was last active (see the package doc).
		return
	case !Active(g):
		m.replace(key, nil)
	default:
		converted, err := FromResourceGrant(g)
		if err != nil {
			// The grant controller refuses such a grant; until it says so,
			// counting nothing fails closed.
			logf.Log.WithName("grant-mirror").Error(err, "grant is Active but does not convert", "grant", key)
			converted = nil
		}
		m.replace(key, converted)
	}
}

func (m *Mirror) forget(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	g, ok := obj.(*quotav1alpha1.ResourceGrant)
	if !ok {
		return
	}
	m.replace(types.NamespacedName{Namespace: g.Namespace, Name: g.Name}, nil)
}

// replace swaps one object's grants and tells subscribers which pairs
// changed. Readers never see the swap half done: they take m.mu too.
func (m *Mirror) replace(key types.NamespacedName, grants []ledger.Grant) {
	m.mu.Lock()
	prev := m.objects[key]
	if prev.print == fingerprint(grants) {
		m.mu.Unlock()
		return
	}
	m.set.Delete(ids(prev.grants)...)
	if err := m.set.Set(grants...); err != nil {
		// Set stores nothing on error, so this object counts nothing: fail
		// closed until the grant controller marks it inactive.
		logf.Log.WithName("grant-mirror").Error(err, "grant rejected by the grant set", "grant", key)
		grants = nil
	}
	if len(grants) == 0 {
		delete(m.objects, key)
	} else {
		m.objects[key] = mirrored{grants: grants, print: fingerprint(grants)}
	}
	m.mu.Unlock()

	changed := map[Change]bool{}
	for _, g := range slices.Concat(prev.grants, grants) {
		changed[Change{g.Consumer, g.ResourceType}] = true
	}
	m.notify(sortedChanges(changed))
}

func (m *Mirror) notify(changes []Change) {
	m.subMu.Lock()
	subs := slices.Collect(maps.Values(m.subs))
	m.subMu.Unlock()
	for _, c := range changes {
		for _, fn := range subs {
			fn(c)
		}
	}
}

func ids(grants []ledger.Grant) []string {
	out := make([]string, len(grants))
	for i, g := range grants {
		out[i] = g.ID
	}
	return out
}

// fingerprint identifies everything about grants that can change a limit;
// a status-only update of the object fingerprints the same and is ignored.
func fingerprint(grants []ledger.Grant) string {
	var b strings.Builder
	for _, g := range grants {
		sel := "*"
		if g.Selector != nil {
			sel = g.Selector.String()
		}
		fmt.Fprintf(&b, "%s|%d|%+v|%s|%d|%s\n", g.ID, g.Generation, g.Consumer, g.ResourceType, g.Amount, sel)
	}
	return b.String()
}

func sortedChanges(set map[Change]bool) []Change {
	out := slices.Collect(maps.Keys(set))
	slices.SortFunc(out, func(a, b Change) int {
		return strings.Compare(fmt.Sprintf("%+v %s", a.Consumer, a.ResourceType), fmt.Sprintf("%+v %s", b.Consumer, b.ResourceType))
	})
	return out
}
