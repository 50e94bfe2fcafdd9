package observer

import (
	"context"
	"maps"
	"math"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotakeeper/quotakeeper/internal/counted"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// Recounting (package counted): a quota constraint's policy version is
// published once every object that existed when the observer loaded it has
// been evaluated under it and every bucket that changed has been written.
// Until then quota.reserve denies what the constraint would charge, so no
// request is decided against a bucket that does not yet count the objects
// the constraint now covers (issue 22, case 5: 400 ConfigMaps, a new
// QuotaEntity of 10, 4 creates admitted right after it).

// publishInterval is how often the observer looks for recounts complete:
// the longest a request waits after one, beyond its own retry.
const publishInterval = 200 * time.Millisecond

// anyPolicy is the policy version at which an item that needs no
// evaluation (a claim, an object gone) counts as evaluated.
const anyPolicy = math.MaxUint64

// recount is one constraint version (Observer.versions) waiting to be
// published.
type recount struct {
	// policy is policy.version once the constraint was loaded: an object
	// evaluated at an older one may not count what the constraint covers.
	policy uint64
	// items are those the first resync after the change listed and that
	// have not been evaluated at policy since; nil until that resync.
	items map[item]bool
	// tallied is when the last of items was evaluated; zero until then.
	tallied time.Time
}

// setVersion notes that constraint key (counted.Key) stands at version
// ("" when it is gone or unstamped), and reports whether that is new and
// is to be recounted. Called with o.mu held.
func (o *Observer) setVersion(key, version string) bool {
	if version == "" {
		delete(o.versions, key)
		delete(o.recounts, key)
		return false
	}
	if o.versions[key] == version {
		return false
	}
	o.versions[key] = version
	if !o.ready.Load() && o.published.Has(version) {
		// A leader before this one counted it, and its buckets have been
		// kept since: a restart does not deny it while the buckets are
		// written again.
		return false
	}
	o.recounts[key] = &recount{policy: o.policy.version.Load()}
	return true
}

// loadPublished reads the record a leader before this one published.
func (o *Observer) loadPublished(ctx context.Context) error {
	cm := &corev1.ConfigMap{}
	err := o.live.Get(ctx, types.NamespacedName{Namespace: o.opts.SystemNamespace, Name: counted.ConfigMapName}, cm)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	o.published = counted.Record(cm.Data)
	if o.published == nil {
		o.published = counted.Record{}
	}
	return nil
}

// recountKind recounts every constraint of kind as it stands: its template
// changed. Called with o.mu held.
func (o *Observer) recountKind(kind string) {
	for key := range o.versions {
		if strings.HasPrefix(key, kind+".") {
			o.recounts[key] = &recount{policy: o.policy.version.Load()}
		}
	}
}

// waitingForList returns the recounts waiting for a resync to list their
// items. Called with o.mu held, before the resync lists.
func (o *Observer) waitingForList() []*recount {
	var out []*recount
	for _, r := range o.recounts {
		if r.items == nil {
			out = append(out, r)
		}
	}
	return out
}

// listedForRecount gives the recounts waiting the items a resync listed.
func (o *Observer) listedForRecount(waiting []*recount, items []item) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.opts.Now()
	for _, r := range waiting {
		r.items = make(map[item]bool, len(items))
		for _, it := range items {
			r.items[it] = true
		}
		if len(r.items) == 0 {
			r.tallied = now
		}
	}
}

// evaluated notes that it was evaluated at policy version at.
func (o *Observer) evaluated(it item, at uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.opts.Now()
	for _, r := range o.recounts {
		if r.items == nil || !r.tallied.IsZero() || at < r.policy || !r.items[it] {
			continue
		}
		delete(r.items, it)
		if len(r.items) == 0 {
			r.tallied = now
		}
	}
}

// written reports whether every bucket change made by the time t has been
// written. Called with o.mu held.
func (o *Observer) written(t time.Time) bool {
	for _, m := range []map[ledger.BucketKey]time.Time{o.dirtySince, o.writing} {
		for _, since := range m {
			if !since.After(t) {
				return false
			}
		}
	}
	return true
}

// publishable is the record of every constraint version counted, with the
// recounts now complete removed. Called with o.mu held.
func (o *Observer) publishable() counted.Record {
	for key, r := range o.recounts {
		if !r.tallied.IsZero() && o.written(r.tallied) {
			delete(o.recounts, key)
		}
	}
	record := counted.Record{}
	for key, version := range o.versions {
		if o.recounts[key] == nil {
			record.Add(version)
		}
	}
	return record
}

// publish writes the record of counted versions when it changed.
func (o *Observer) publish(ctx context.Context) error {
	o.mu.Lock()
	record := o.publishable()
	o.mu.Unlock()
	if maps.Equal(o.published, record) {
		return nil
	}
	cm := &corev1.ConfigMap{}
	// The live object, not the cache: the manager does not watch
	// ConfigMaps for this, and one GET per change costs nothing.
	err := o.live.Get(ctx, types.NamespacedName{Namespace: o.opts.SystemNamespace, Name: counted.ConfigMapName}, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: o.opts.SystemNamespace, Name: counted.ConfigMapName}, Data: record}
		err = o.client.Create(ctx, cm)
	case err == nil:
		cm.Data = record
		err = o.client.Update(ctx, cm)
	}
	if err != nil {
		return err
	}
	o.published = record
	return nil
}

// stampVersion writes the policy version into a constraint that reached
// the API server without it (a custom template's kind, or the manager's
// webhook down); once per version, so a template whose schema drops the
// field is not patched forever. It reports whether u carries version.
func (o *Observer) stampVersion(ctx context.Context, u *unstructured.Unstructured, version string) (bool, error) {
	if counted.Stamped(u) == version {
		return true, nil
	}
	key := counted.Key(u.GetKind(), u.GetName())
	o.mu.Lock()
	tried := o.stamped[key] == version
	o.stamped[key] = version
	o.mu.Unlock()
	if tried {
		o.log.Info("a quota constraint keeps no parameters."+counted.Field+" (does its template's parameter schema declare it?): requests it charges are denied", "kind", u.GetKind(), "name", u.GetName())
		return false, nil
	}
	patch := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"parameters": map[string]any{counted.Field: version}}}}
	patch.SetGroupVersionKind(u.GroupVersionKind())
	patch.SetName(u.GetName())
	raw, err := patch.MarshalJSON()
	if err != nil {
		return false, err
	}
	return false, o.client.Patch(ctx, u.DeepCopy(), client.RawPatch(types.MergePatchType, raw))
}
