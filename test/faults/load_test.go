package faults_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// loadLabel marks the ConfigMaps the creators make, valued by scenario.
const loadLabel = "faults.quota/load"

// The outcomes of the creators' requests, by object name.
type outcomes struct {
	mu sync.Mutex
	// live: admitted, and not deleted (or the delete failed before the
	// apiserver answered, see unknown).
	live map[string]bool
	// refused: denied by a webhook (403), or failed by one that could not
	// be called (failurePolicy Fail): the object must never exist.
	refused map[string]bool
	// unknown: the request failed without an answer (connection lost, a
	// timeout, the apiserver's 5xx); the object may or may not exist.
	unknown map[string]bool
	// deleted: admitted, then deleted with the apiserver's answer.
	deleted map[string]bool
	// quotaDenials: refusals whose message is quota's (available N of M).
	quotaDenials int
	// others counts the other refusals and failures by message, for the log.
	others   map[string]int
	admitted atomic.Int64
}

// creators makes ConfigMaps in ns from n goroutines until stop is closed.
// Each keeps at most hold of its own objects: past that, or refused while it
// holds at least its share of the limit, it deletes its oldest (a full
// bucket always has a creator at its share, so someone always frees quota).
// So quota is freed and taken again all the time (reservations are in flight
// whenever a fault strikes), n*hold above the limit keeps the bucket
// contended, and the bucket stays near its limit, which the end state then
// counts.
func creators(ns string, n, hold int, stop <-chan struct{}) (*outcomes, *sync.WaitGroup) {
	o := &outcomes{live: map[string]bool{}, refused: map[string]bool{}, unknown: map[string]bool{}, deleted: map[string]bool{}, others: map[string]int{}}
	share := max(1, limit/n)
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			var mine []string
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("%s-%d-%d", ns, w, i)
				err := request(func(ctx context.Context) error {
					return cluster.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
						Name: name, Namespace: ns, Labels: map[string]string{loadLabel: ns}}})
				})
				admitted := o.created(name, err)
				if admitted {
					mine = append(mine, name)
				}
				if len(mine) > hold || (!admitted && len(mine) >= share) {
					oldest := mine[0]
					mine = mine[1:]
					o.deletedOne(oldest, request(func(ctx context.Context) error {
						return cluster.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: oldest, Namespace: ns}})
					}))
				}
				if !admitted {
					// A refused or failed create comes back at once; do not
					// spin on a cluster that is down.
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	return o, &wg
}

// request runs one call with a deadline, so that a creator blocked on a
// stopped etcd gives up as a client would.
func request(call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return call(ctx)
}

func (o *outcomes) created(name string, err error) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err == nil:
		o.live[name] = true
		o.admitted.Add(1)
		return true
	case apierrors.IsForbidden(err) || failedWebhook(err):
		o.refused[name] = true
		if isQuotaDenial(err) {
			o.quotaDenials++
			return false
		}
		o.others["refused: "+generic(err, name)]++
	default:
		o.unknown[name] = true
		o.others["no answer: "+generic(err, name)]++
	}
	return false
}

func (o *outcomes) deletedOne(name string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.live, name)
	if err == nil || apierrors.IsNotFound(err) {
		o.deleted[name] = true
		return
	}
	o.unknown[name] = true
}

// logOthers logs the refusals other than quota's and the failures, by
// message: what the creators saw of the fault.
func (o *outcomes) logOthers(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, msg := range slices.Sorted(maps.Keys(o.others)) {
		t.Logf("%d× %s", o.others[msg], msg)
	}
}

func (o *outcomes) counts() (admitted, refused, quota, unknown int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return int(o.admitted.Load()), len(o.refused), o.quotaDenials, len(o.unknown)
}

// check compares the objects that exist with what the creators were told:
// every object admitted and not deleted exists, no refused or deleted one
// does, and any other is one whose request failed without an answer.
func (o *outcomes) check(t *testing.T, existing map[string]bool) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	var missing, refused, deleted, unexplained []string
	for name := range o.live {
		if !existing[name] {
			missing = append(missing, name)
		}
	}
	for name := range existing {
		switch {
		case o.refused[name]:
			refused = append(refused, name)
		case o.deleted[name]:
			deleted = append(deleted, name)
		case !o.live[name] && !o.unknown[name]:
			unexplained = append(unexplained, name)
		}
	}
	for what, names := range map[string][]string{
		"admitted but missing":       missing,
		"refused but existing":       refused,
		"deleted but existing":       deleted,
		"existing, never a response": unexplained,
	} {
		if len(names) > 0 {
			sort.Strings(names)
			t.Errorf("%s: %v", what, names)
		}
	}
}

// uids are the object uids (claim ids) in messages.
var uids = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// generic is err's message without the object's name and uid, so that alike
// failures count together.
func generic(err error, name string) string {
	return uids.ReplaceAllString(strings.ReplaceAll(err.Error(), name, "NAME"), "UID")
}

// failedWebhook: the apiserver could not call a webhook and failed the
// request before storing anything.
func failedWebhook(err error) bool {
	return apierrors.IsInternalError(err) && strings.Contains(err.Error(), "failed calling webhook")
}

func isQuotaDenial(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && containsAll(status.Status().Message, "requested 1 of", "available")
}

// existing is the names of the creators' objects in ns.
func existing(ctx context.Context, ns string) (map[string]bool, error) {
	var list corev1.ConfigMapList
	if err := cluster.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{loadLabel: ns}); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, cm := range list.Items {
		if cm.DeletionTimestamp == nil {
			out[cm.Name] = true
		}
	}
	return out, nil
}
