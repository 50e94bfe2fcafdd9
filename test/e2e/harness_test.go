package e2e_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// The exactness harness (issue 22): randomized tenant actions from several
// goroutines against one consumer, with a slower webhook after
// Gatekeeper's holding updates for a while, checked against an independent
// count of what the live objects use (read from the API server, summed
// here, never asked of quotakeeper): at no sampled moment may it exceed the
// limit, and after quiescence the bucket's allocated equals it with no
// reservation left. Now and then the platform team edits the constraint (a
// new policy version: the manager recounts while the tenants act), halfway
// through the manager is killed and started again, and three quarters
// through a Gatekeeper replica. make test runs
// a short run; make exactness a long one:
//
//	make exactness EXACTNESS_ACTIONS=2000 EXACTNESS_SEED=42
var (
	exactnessActions = flag.Int("exactness.actions", 300, "tenant actions the exactness harness takes")
	exactnessSeed    = flag.Uint64("exactness.seed", 0, "the harness's seed (0: from the clock; printed to replay a run)")
)

// The actions the harness takes, each an ordinary kubectl action of a
// tenant on a ConfigMap whose units annotation a QuotaAllocation counts
// while it carries the label quota=counted.
const (
	actCreate      = "create"
	actGrow        = "update that grows"
	actShrink      = "update that shrinks"
	actLabelIn     = "label into scope"
	actLabelOut    = "label out of scope"
	actDelete      = "delete"
	actGrowLabelIn = "grow and label into scope"
	// The platform team's action: an edit of the constraint that changes
	// nothing counted but its policy version, so the manager recounts
	// while the tenants act (package counted).
	actEditConstraint = "constraint edit"
)

var tenantActions = []string{actCreate, actGrow, actShrink, actLabelIn, actLabelOut, actDelete, actGrowLabelIn}

var harnessActions = append(slices.Clone(tenantActions), actEditConstraint)

// pickAction draws an action: a constraint edit one time in 40, creates
// twice as often as each other tenant action so that the pool stays
// populated while deletes empty it.
func pickAction(rng *rand.Rand) string {
	if rng.IntN(40) == 0 {
		return actEditConstraint
	}
	if i := rng.IntN(len(tenantActions) + 1); i < len(tenantActions) {
		return tenantActions[i]
	}
	return actCreate
}

func TestExactnessUnderRandomTenantActions(t *testing.T) {
	const ns, rt, limit, pool, workers = "e2e-exactness", "e2e.quota/exactness-units", 20, 16, 6
	seed := *exactnessSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: make exactness EXACTNESS_SEED=%d EXACTNESS_ACTIONS=%d)", seed, seed, *exactnessActions)
	consumer := unitsQuotaScoped(t, ns, rt, limit)

	// Updates wait up to 1.5 s in a second webhook, so the harness's other
	// actions run while they are in flight (within the reservation TTL).
	var held atomic.Int64
	laterWebhook(t, "slow-updates", ns, configMapUpdates, func(ctx context.Context, _ metav1.PartialObjectMetadata) *admissionv1.AdmissionResponse {
		held.Add(1)
		select {
		case <-time.After(time.Duration(rand.IntN(1500)) * time.Millisecond):
		case <-ctx.Done():
		}
		return &admissionv1.AdmissionResponse{Allowed: true}
	})
	waitSlowWebhook(t, ns, &held)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu           sync.Mutex
		taken        = map[string]int{}
		admitted     = map[string]int{}
		denied       = map[string]int{}
		raced        = map[string]int{} // another worker changed or removed the object first
		failedClosed = map[string]int{} // the webhook call failed: a Gatekeeper replica was killed
		denial       = map[string]string{}
		violations   []string
		maxUsed      int64
	)
	// The monitor: the live objects' usage, sampled as fast as a list goes.
	monitorDone := make(chan struct{})
	go func() {
		defer close(monitorDone)
		for ctx.Err() == nil {
			used, err := liveScopedUnits(ctx, ns)
			if err != nil {
				continue
			}
			mu.Lock()
			maxUsed = max(maxUsed, used)
			if used > limit {
				violations = append(violations, fmt.Sprintf("%s: the live objects use %d of %d", time.Now().Format(time.RFC3339Nano), used, limit))
			}
			mu.Unlock()
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
				act := pickAction(rng)
				name := fmt.Sprintf("cm-%d", rng.IntN(pool))
				var err error
				if act == actEditConstraint {
					err = editConstraint(ctx, ns)
					if err != nil && managerDown.Load() {
						err = errNotApplicable // the manager's webhook is down: constraints cannot change
					}
				} else {
					err = harnessAct(ctx, ns, name, act, rng)
				}
				mu.Lock()
				taken[act]++
				switch {
				case err == nil:
					admitted[act]++
				case apierrors.IsForbidden(err):
					denied[act]++
					denial[act] = err.Error()
				case errors.Is(err, errNotApplicable):
				case apierrors.IsConflict(err), apierrors.IsNotFound(err), apierrors.IsAlreadyExists(err):
					raced[act]++
				case apierrors.IsInternalError(err) && strings.Contains(err.Error(), "failed calling webhook"):
					// A replica killed mid-review (or the balancer had not
					// dropped it yet): the request failed closed.
					failedClosed[act]++
				default:
					t.Errorf("%s %s: %v", act, name, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Quiescence: allocated is the truth, nothing reserved.
	var truth int64
	testenv.Eventually(t, 2*time.Minute, "the bucket at the live objects' usage", func() error {
		var err error
		if truth, err = liveScopedUnits(context.Background(), ns); err != nil {
			return err
		}
		st, err := getBucket(consumer, rt)
		if err != nil {
			return err
		}
		if st.Allocated != truth || st.Reserved != 0 {
			return fmt.Errorf("allocated %d reserved %d, the live objects use %d (reservations %v)", st.Allocated, st.Reserved, truth, st.Reservations)
		}
		return nil
	})
	cancel()
	<-monitorDone

	mu.Lock()
	defer mu.Unlock()
	for _, act := range harnessActions {
		t.Logf("%-26s drawn %4d  admitted %4d  denied %4d  raced %4d  failed closed %2d", act, taken[act], admitted[act], denied[act], raced[act], failedClosed[act])
		if denial[act] != "" {
			t.Logf("  last denial: %s", denial[act])
		}
	}
	t.Logf("seed %d: %d actions, %d updates held by the slow webhook, the live objects used at most %d of %d, %d at rest; %d violations",
		seed, *exactnessActions, held.Load(), maxUsed, limit, truth, len(violations))
	for _, v := range violations {
		t.Errorf("violation (seed %d): %s", seed, v)
	}
}

var errNotApplicable = errors.New("not applicable to the object as it is")

// editConstraint flips the QuotaAllocation's parameters.reportOverLimit,
// which only audit reads: a new policy version, nothing counted differently.
func editConstraint(ctx context.Context, name string) error {
	c := &unstructured.Unstructured{}
	c.SetGroupVersionKind(constraintGVK("QuotaAllocation"))
	if err := cluster.Client.Get(ctx, client.ObjectKey{Name: name}, c); err != nil {
		return err
	}
	report, found, _ := unstructured.NestedBool(c.Object, "spec", "parameters", "reportOverLimit")
	if err := unstructured.SetNestedField(c.Object, found && !report, "spec", "parameters", "reportOverLimit"); err != nil {
		return err
	}
	return cluster.Client.Update(ctx, c)
}

// harnessAct takes one action on ConfigMap name in ns.
func harnessAct(ctx context.Context, ns, name, act string, rng *rand.Rand) error {
	if act == actCreate {
		// A create of a name that exists is admitted (and reserves) before
		// the API server finds the name taken, and its reservation is held
		// until it expires: conservative, but it fills the quota with
		// false denials. Tenants rarely do it; the harness avoids it.
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{}); err == nil {
			return errNotApplicable
		}
		cm := unitsConfigMap(ns, name, 1+rng.IntN(6))
		if rng.IntN(3) > 0 {
			cm.Labels = map[string]string{"quota": "counted"}
		}
		return cluster.Client.Create(ctx, cm)
	}
	cm := &corev1.ConfigMap{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
		return err
	}
	if act == actDelete {
		return cluster.Client.Delete(ctx, cm, client.Preconditions{ResourceVersion: &cm.ResourceVersion})
	}
	units, _ := strconv.Atoi(cm.Annotations[unitsAnnotation])
	inScope := cm.Labels["quota"] == "counted"
	switch act {
	case actGrow:
		units += 1 + rng.IntN(5)
	case actShrink:
		if units <= 1 {
			return errNotApplicable
		}
		units = 1 + rng.IntN(units-1)
	case actLabelIn, actGrowLabelIn:
		if inScope {
			return errNotApplicable
		}
		if act == actGrowLabelIn {
			units += 1 + rng.IntN(5)
		}
		cm.Labels = map[string]string{"quota": "counted"}
	case actLabelOut:
		if !inScope {
			return errNotApplicable
		}
		delete(cm.Labels, "quota")
	}
	cm.Annotations[unitsAnnotation] = strconv.Itoa(units)
	return cluster.Client.Update(ctx, cm)
}

// liveScopedUnits is the independent count: the units the live ConfigMaps
// of ns labelled quota=counted ask for.
func liveScopedUnits(ctx context.Context, ns string) (int64, error) {
	var list corev1.ConfigMapList
	if err := cluster.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"quota": "counted"}); err != nil {
		return 0, err
	}
	var sum int64
	for _, cm := range list.Items {
		n, err := strconv.ParseInt(cm.Annotations[unitsAnnotation], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("ConfigMap %s: %w", cm.Name, err)
		}
		sum += n
	}
	return sum, nil
}

// unitsQuotaScoped is unitsQuota scoped to the ConfigMaps labelled
// quota=counted, by parameters.labelSelector.
func unitsQuotaScoped(t *testing.T, ns, resourceType string, limit int64) quotav1alpha1.ConsumerRef {
	t.Helper()
	return unitsQuotaWith(t, ns, resourceType, limit, map[string]any{"matchLabels": map[string]any{"quota": "counted"}})
}

// waitSlowWebhook waits until updates in ns pass through the slow webhook:
// a server-side dry run of an update reaches it (and counts in held).
func waitSlowWebhook(t *testing.T, ns string, held *atomic.Int64) {
	t.Helper()
	probe := unitsConfigMap(ns, "probe", 0)
	if err := cluster.Client.Create(context.Background(), probe); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), probe) })
	testenv.Eventually(t, time.Minute, "the slow webhook in the chain", func() error {
		probe.Annotations["e2e.quota/probe"] = "1"
		if err := cluster.Client.Update(context.Background(), probe.DeepCopy(), client.DryRunAll); err != nil {
			return err
		}
		if held.Load() == 0 {
			return errors.New("the dry run did not reach it")
		}
		return nil
	})
	held.Store(0)
}
