package e2e_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// The exactness harness (issue 22): randomized tenant actions from several
// goroutines, across every kind of action that changes what an object
// counts, each lane against a consumer of its own (harness_lanes_test.go):
//
//   - ConfigMaps under a QuotaAllocation counting an annotation, scoped by a
//     label: create, updates that grow and shrink (no metadata.generation),
//     label into and out of scope, delete;
//   - Deployments under a CPU QuotaAllocation counting replicas x what a pod
//     requests: create, updates of the template's CPU that grow and shrink
//     (with metadata.generation), scale through the scale subresource,
//     delete, orphaning delete;
//   - ConfigMaps in three namespaces shared by an Organization: create,
//     delete, and the platform team relabelling a namespace into or out of
//     the Organization;
//   - ConfigMaps charged by a ClaimCreationPolicy by their payload's size:
//     create, updates that grow and shrink, delete;
//   - an Organization's admin handing its cap out to two namespaces
//     (harness_delegation_test.go): delegated grants created, raised,
//     lowered and deleted, the truth the sum of the live hand-outs;
//
// and the platform team's edits of each lane's constraint or policy (a new
// policy version: the manager recounts while the tenants act). Updates wait
// in a slower webhook after Gatekeeper's; halfway through the manager is
// killed and started again, three quarters through a Gatekeeper replica.
//
// Each lane's truth is an independent count of what its live objects use,
// read from the API server and computed here (a Deployment's pod by
// Kubernetes' own k8s.io/component-helpers/resource), never asked of
// quotakeeper: at no sampled moment may it exceed a consumer's limit, and
// after quiescence every bucket's allocated equals it with no reservation
// left. make test runs a short run; make exactness a long one:
//
//	make exactness EXACTNESS_ACTIONS=2000 EXACTNESS_SEED=42
var (
	exactnessActions = flag.Int("exactness.actions", 600, "tenant actions the exactness harness takes")
	exactnessSeed    = flag.Uint64("exactness.seed", 0, "the harness's seed (0: from the clock; printed to replay a run)")
)

// harnessLane is one consumer's share of the harness: its objects, the
// actions tenants take on them, the platform team's edit of what counts
// them, and the truth of what they use.
type harnessLane struct {
	name string
	// actions are the tenants' actions, drawn uniformly (an action listed
	// twice is drawn twice as often).
	actions []string
	// edit is the platform team's action on the lane's constraint or
	// policy: a new policy version that changes nothing counted.
	edit    string
	buckets []harnessBucket
	// act takes act, saying through say which object it took it on and
	// what it changed.
	act func(ctx context.Context, act string, rng *rand.Rand, say sayFunc) error
	// truth is what the live objects use, per bucket (in buckets' order).
	truth func(ctx context.Context) ([]int64, error)
	// trace is the lane's last actions, to show beside a violation.
	trace harnessTrace
}

type sayFunc = func(format string, args ...any)

// harnessTrace holds a lane's last 40 actions taken, as lines.
type harnessTrace struct {
	mu     sync.Mutex
	events []string
}

func (tr *harnessTrace) add(line string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.events = append(tr.events, line)
	if len(tr.events) > 40 {
		tr.events = tr.events[1:]
	}
}

func (tr *harnessTrace) snapshot() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.events)
}

// violation is a stretch of samples in which a bucket's live objects used
// more than its limit.
type violation struct {
	bucket      harnessBucket
	first, last time.Time
	maxUsed     int64
	samples     int
	status      string   // the bucket when first seen
	trace       []string // the lane's last actions when first seen
}

// harnessBucket is a consumer's quota of a resource type, as the harness
// checks it.
type harnessBucket struct {
	consumer quotav1alpha1.ConsumerRef
	rt       string
	limit    int64
}

func (b harnessBucket) String() string {
	return fmt.Sprintf("%s %s %s", b.consumer.Kind, b.consumer.Name, b.rt)
}

// kinds is every action the lane takes, each once, in the order drawn.
func (l *harnessLane) kinds() []string {
	var out []string
	for _, a := range append(l.actions, l.edit) {
		if k := l.name + ": " + a; !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// pick draws a lane and one of its actions: the platform's edit one time in
// 40, else a tenant action.
func pick(rng *rand.Rand, lanes []*harnessLane) (*harnessLane, string) {
	l := lanes[rng.IntN(len(lanes))]
	if rng.IntN(40) == 0 {
		return l, l.edit
	}
	return l, l.actions[rng.IntN(len(l.actions))]
}

func TestExactnessUnderRandomTenantActions(t *testing.T) {
	const workers = 6
	seed := *exactnessSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: make exactness EXACTNESS_SEED=%d EXACTNESS_ACTIONS=%d)", seed, seed, *exactnessActions)
	start := time.Now()
	defer leasedSince(t)()

	// Updates wait up to 1.5 s in a second webhook, so the harness's other
	// actions run while they are in flight (within the reservation TTL).
	var held atomic.Int64
	slow := func(ctx context.Context, _ metav1.PartialObjectMetadata) *admissionv1.AdmissionResponse {
		held.Add(1)
		select {
		case <-time.After(time.Duration(rand.IntN(1500)) * time.Millisecond):
		case <-ctx.Done():
		}
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	lanes := []*harnessLane{
		unitsLane(t, "e2e-exactness", slow, &held),
		cpuLane(t, "e2e-exactness-cpu", slow, &held),
		orgLane(t, "e2e-exactness-org"),
		claimPolicyLane(t, "e2e-exactness-ccp", slow, &held),
		delegationLane(t, "e2e-exactness-deleg"),
	}
	held.Store(0) // the probes'
	t.Logf("lanes set up in %s", time.Since(start).Round(time.Second))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu           sync.Mutex
		taken        = map[string]int{}
		admitted     = map[string]int{}
		denied       = map[string]int{}
		skipped      = map[string]int{} // not applicable to the object drawn (nothing to shrink, a name taken, ...)
		raced        = map[string]int{} // another worker changed or removed the object first
		failedClosed = map[string]int{} // a webhook call failed: a Gatekeeper replica (or the manager) was down
		denial       = map[string]string{}
		violations   []*violation
		over         = map[string]*violation{} // the violation each bucket is in now
		maxUsed      = map[string]int64{}
	)
	// The monitor: every lane's live objects, sampled as fast as lists go.
	monitorDone := make(chan struct{})
	go func() {
		defer close(monitorDone)
		for ctx.Err() == nil {
			for _, l := range lanes {
				used, err := l.truth(ctx)
				if err != nil {
					continue
				}
				mu.Lock()
				for i, b := range l.buckets {
					key := b.String()
					maxUsed[key] = max(maxUsed[key], used[i])
					if used[i] <= b.limit {
						delete(over, key)
						continue
					}
					v := over[key]
					if v == nil {
						v = &violation{bucket: b, first: time.Now(), trace: l.trace.snapshot()}
						st, err := getBucket(b.consumer, b.rt)
						v.status = fmt.Sprintf("allocated %d reserved %d reservations %v (%v)", st.Allocated, st.Reserved, st.Reservations, err)
						over[key] = v
						violations = append(violations, v)
					}
					v.last, v.samples, v.maxUsed = time.Now(), v.samples+1, max(v.maxUsed, used[i])
				}
				mu.Unlock()
			}
		}
	}()

	var next atomic.Int64
	var wg sync.WaitGroup
	// Halfway through, the manager (the observer, mid-recount perhaps) is
	// killed and started again while the tenants go on.
	var managerDown atomic.Bool
	wg.Go(func() {
		for next.Load() < int64(*exactnessActions)/2 {
			time.Sleep(50 * time.Millisecond)
		}
		managerDown.Store(true)
		cluster.Manager.Kill()
		time.Sleep(2 * time.Second)
		if err := cluster.Restart(context.Background(), cluster.Manager); err != nil {
			t.Error(err)
		}
		managerDown.Store(false)
	})
	// Three quarters through, a Gatekeeper replica is killed mid-review and
	// started again: the requests it was deciding fail (the webhook fails
	// closed), and what it reserved for them expires.
	wg.Go(func() {
		for next.Load() < int64(*exactnessActions)*3/4 {
			time.Sleep(50 * time.Millisecond)
		}
		gk := cluster.Gatekeepers[len(cluster.Gatekeepers)-1]
		gk.Kill()
		time.Sleep(2 * time.Second)
		if err := cluster.Restart(context.Background(), gk); err != nil {
			t.Error(err)
		}
	})
	for w := range workers {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			for next.Add(1) <= int64(*exactnessActions) {
				l, act := pick(rng, lanes)
				var detail strings.Builder
				began := time.Now()
				err := l.act(ctx, act, rng, func(format string, args ...any) { fmt.Fprintf(&detail, format, args...) })
				if !errors.Is(err, errNotApplicable) {
					outcome := "admitted"
					if err != nil {
						outcome = err.Error()
					}
					l.trace.add(fmt.Sprintf("%s..%s %s %s: %s", began.Format("15:04:05.000"), time.Now().Format("15:04:05.000"), act, detail.String(), outcome))
				}
				if err != nil && act == l.edit && managerDown.Load() {
					err = errNotApplicable // the manager's webhook is down: constraints and policies cannot change
				}
				kind := l.name + ": " + act
				mu.Lock()
				taken[kind]++
				switch {
				case err == nil:
					admitted[kind]++
				case apierrors.IsForbidden(err):
					denied[kind]++
					denial[kind] = err.Error()
				case errors.Is(err, errNotApplicable):
					skipped[kind]++
				case apierrors.IsConflict(err), apierrors.IsNotFound(err), apierrors.IsAlreadyExists(err):
					raced[kind]++
				case apierrors.IsServiceUnavailable(err) && strings.Contains(err.Error(), "still reading the ResourceGrants"),
					apierrors.IsInternalError(err) && strings.Contains(err.Error(), "failed calling webhook"):
					// A replica killed mid-review (or the balancer had not
					// dropped it yet), or the manager down under a
					// relabel: the request failed closed.
					failedClosed[kind]++
				default:
					t.Errorf("%s: %v", kind, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	acted := time.Since(start)
	// What each bucket holds as the tenants stop: reservations still there
	// are requests in flight, or ones that will only expire.
	for _, l := range lanes {
		used, err := l.truth(context.Background())
		for i, b := range l.buckets {
			st, berr := getBucket(b.consumer, b.rt)
			if err != nil || berr != nil {
				t.Logf("%s as the tenants stop: %v %v", b, err, berr)
				continue
			}
			t.Logf("%s as the tenants stop: the live objects use %d; allocated %d reserved %d in %d reservations",
				b, used[i], st.Allocated, st.Reserved, len(st.Reservations))
			for _, r := range st.Reservations {
				t.Logf("  reservation %s amount %d total %d expires %s: %s/%s/%s", r.ID, r.Amount, r.Total, r.ExpiresAt.Format("15:04:05.000"), r.Object.Kind, r.Object.Namespace, r.Object.Name)
			}
		}
	}
	// Quiescence: every bucket's allocated is the truth, nothing reserved.
	truths := map[string]int64{}
	testenv.Eventually(t, 2*time.Minute, "every bucket at the live objects' usage", func() error {
		var errs []error
		for _, l := range lanes {
			used, err := l.truth(context.Background())
			if err != nil {
				return err
			}
			for i, b := range l.buckets {
				truths[b.String()] = used[i]
				st, err := getBucket(b.consumer, b.rt)
				if err != nil {
					return err
				}
				if st.Allocated != used[i] || st.Reserved != 0 {
					errs = append(errs, fmt.Errorf("%s: allocated %d reserved %d, the live objects use %d (reservations %v)",
						b, st.Allocated, st.Reserved, used[i], st.Reservations))
				}
			}
		}
		return errors.Join(errs...)
	})
	cancel()
	<-monitorDone

	mu.Lock()
	defer mu.Unlock()
	for _, l := range lanes {
		for _, kind := range l.kinds() {
			t.Logf("%-48s drawn %4d  admitted %4d  denied %4d  raced %4d  failed closed %2d  skipped %4d",
				kind, taken[kind], admitted[kind], denied[kind], raced[kind], failedClosed[kind], skipped[kind])
			if denial[kind] != "" {
				t.Logf("  last denial: %s", denial[kind])
			}
		}
		for _, b := range l.buckets {
			t.Logf("%s: the live objects used at most %d of %d, %d at rest", b, maxUsed[b.String()], b.limit, truths[b.String()])
		}
	}
	t.Logf("seed %d: %d actions in %s (settled %s later), %d updates held by the slow webhook; %d violations",
		seed, *exactnessActions, acted.Round(time.Second), (time.Since(start) - acted).Round(time.Second), held.Load(), len(violations))
	for _, v := range violations {
		t.Errorf("violation (seed %d): the live objects of %s used up to %d of %d from %s to %s (%d samples); the bucket when first seen: %s; the lane's last actions then:\n  %s",
			seed, v.bucket, v.maxUsed, v.bucket.limit, v.first.Format("15:04:05.000"), v.last.Format("15:04:05.000"), v.samples, v.status, strings.Join(v.trace, "\n  "))
	}
}

var errNotApplicable = errors.New("not applicable to the object as it is")

// editConstraint flips parameters.reportOverLimit of the constraint of kind
// and name, which only audit reads: a new policy version, nothing counted
// differently.
func editConstraint(ctx context.Context, kind, name string) error {
	c := &unstructured.Unstructured{}
	c.SetGroupVersionKind(constraintGVK(kind))
	if err := cluster.Client.Get(ctx, client.ObjectKey{Name: name}, c); err != nil {
		return err
	}
	report, found, _ := unstructured.NestedBool(c.Object, "spec", "parameters", "reportOverLimit")
	if err := unstructured.SetNestedField(c.Object, found && !report, "spec", "parameters", "reportOverLimit"); err != nil {
		return err
	}
	return cluster.Client.Update(ctx, c)
}

// slowUpdates puts the slow webhook in the admission chain of rule's
// requests in ns, and waits until a server-side dry run of an update of
// probe (which it creates, and which must count nothing) reaches it.
func slowUpdates(t *testing.T, ns string, rule admissionregistrationv1.RuleWithOperations, answer func(context.Context, metav1.PartialObjectMetadata) *admissionv1.AdmissionResponse, held *atomic.Int64, probe client.Object) {
	t.Helper()
	laterWebhook(t, "slow-updates", ns, rule, answer)
	if err := cluster.Client.Create(context.Background(), probe); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), probe) })
	before := held.Load()
	testenv.Eventually(t, time.Minute, "the slow webhook in the chain of "+ns, func() error {
		p := probe.DeepCopyObject().(client.Object)
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(probe), p); err != nil {
			return err
		}
		annotations := p.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations["e2e.quota/probe"] = "1"
		p.SetAnnotations(annotations)
		if err := cluster.Client.Update(context.Background(), p, client.DryRunAll); err != nil {
			return err
		}
		if held.Load() == before {
			return errors.New("the dry run did not reach it")
		}
		return nil
	})
}
