package suite

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"time"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/verify"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/claimpolicies"
	"github.com/quotakeeper/quotakeeper/internal/counting"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// In a cluster, admission only reserves: quotakeeper's observer evaluates
// the constraint on every live object, sets each bucket's allocated to the
// sum of what the objects count, and in the same write removes the
// reservations it now counts; a deleted object stops counting. A case does
// the same after every step a cluster would have admitted, so `usage:`
// reads as in a cluster that has settled: allocated is what the admitted
// objects count, reserved what is still in flight.

// cluster is what a case's steps share: the ledger admission reserves in,
// its store, the ClaimCreationPolicies, the units, the objects a cluster
// would now hold, and what each counts, as the observer keeps it.
type cluster struct {
	ledger   *ledger.Ledger
	store    ledger.Store
	policies *claimpolicies.Set
	units    builtins.UnitSource                   // the quota files' registrations
	objects  map[string]*unstructured.Unstructured // by uid
	// tally is what the objects count, by uid: the observer's state, summed
	// and folded by the observer's rule (package counting).
	tally *counting.Tally
}

// env is what the builtins decide against in the case, reserving in l.
func (cl *cluster) env(l *ledger.Ledger) *builtins.Env {
	return &builtins.Env{Ledger: l, ClaimPolicies: cl.policies, Units: cl.units}
}

// observeUID is the request uid of the review that measures an object.
const observeUID = "quotactl-observe"

// observe updates the case's objects after step st, reviewed from object
// (the path gator read), and writes every bucket whose sums may have
// changed. Only a real admission (a request uid, not a dry run) that was
// admitted changes what exists: a CREATE or UPDATE leaves the object as the
// step gives it, a DELETE removes it, and an UPDATE of a Scale sets the
// replicas of the live workload it scales (scaled). An AdmissionReview file
// reviewed without an admission block is not observed.
func (r *Runner) observe(ctx context.Context, s *Suite, t *Test, c *Case, st Step, object string, cl *cluster) error {
	a := st.Admission
	if a == nil || a.UID == "" || a.DryRun || admissionv1.Operation(a.Operation) == admissionv1.Connect {
		return nil
	}
	obj, err := r.readObject(path.Join(path.Dir(s.path), st.Object))
	if err != nil {
		return fmt.Errorf("object: %w", err)
	}
	uid := string(obj.GetUID())
	if uid == "" {
		return nil
	}
	if admitted, err := r.admitted(ctx, s, t, c, st, object); err != nil || !admitted {
		return err
	}
	if isScale(obj) {
		live, ok := cl.objects[uid]
		if !ok {
			return nil // a workload this case never created: nothing it counts changes
		}
		obj = scaled(live, obj)
	}
	// Every bucket the object counted or counts in is written, changed or
	// not: a write also folds the reservations its figures now count.
	before := cl.tally.Amounts(uid)
	if admissionv1.Operation(a.Operation) == admissionv1.Delete {
		delete(cl.objects, uid)
		cl.tally.Remove(uid)
	} else {
		counts, err := r.measure(ctx, s, t, c, st, obj, before)
		if err != nil {
			return err
		}
		cl.objects[uid] = obj
		cl.tally.Set(uid, counting.Object{UID: uid, Generation: obj.GetGeneration(), Namespace: obj.GetNamespace(), Amounts: counts})
	}
	keys := slices.Concat(slices.Collect(maps.Keys(before)), slices.Collect(maps.Keys(cl.tally.Amounts(uid))))
	slices.SortFunc(keys, counting.CompareKeys)
	for _, key := range slices.Compact(keys) {
		if err := cl.write(ctx, key); err != nil {
			return fmt.Errorf("observing %s: %w", key, err)
		}
	}
	return nil
}

// isScale reports whether obj is an autoscaling Scale: what an update of a
// scale subresource (kubectl scale, a HorizontalPodAutoscaler) carries.
func isScale(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Group == "autoscaling" && gvk.Kind == "Scale"
}

// scaled is the workload after an admitted update of its Scale, as the API
// server leaves a Deployment, ReplicaSet, StatefulSet or
// ReplicationController: spec.replicas is the Scale's, and a change of it
// (a spec change) moves metadata.generation on by one.
func scaled(workload, scale *unstructured.Unstructured) *unstructured.Unstructured {
	out := workload.DeepCopy()
	replicas, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas") // absent is 0
	if old, found, _ := unstructured.NestedInt64(out.Object, "spec", "replicas"); found && old == replicas {
		return out
	}
	_ = unstructured.SetNestedField(out.Object, replicas, "spec", "replicas")
	out.SetGeneration(out.GetGeneration() + 1)
	return out
}

// admitted is the step's decision. The step's assertions, which gator has
// just checked, state it when one of them counts every violation (it has no
// message): none is admitted, some is denied. Otherwise the request is
// reviewed again, asserting no violations: a real admission is idempotent
// (a reservation already held under the claim id counts as taken; a refused
// claim held nothing), so the second review decides what the first did.
func (r *Runner) admitted(ctx context.Context, s *Suite, t *Test, c *Case, st Step, object string) (bool, error) {
	for i := range st.Assertions {
		a := &st.Assertions[i]
		if a.Message != nil {
			continue
		}
		v := intstr.FromString("yes") // gator's default
		if a.Violations != nil {
			v = *a.Violations
		}
		switch {
		case v.Type == intstr.Int:
			return v.IntVal == 0, nil
		case v.StrVal == "no" || v.StrVal == "yes":
			return v.StrVal == "no", nil
		}
	}
	no := intstr.FromString("no")
	cr, err := r.review(ctx, s, t, c.Name+"#admitted", object, c, st, []verify.Assertion{{Violations: &no}})
	if err != nil {
		return false, err
	}
	return cr.Error == nil, nil
}

// measure is what obj counts against each bucket, found the way the
// observer finds it: the constraint evaluated on the object as a CREATE,
// with the builtins in observe mode (builtins.WithRecorder: quota.reserve
// records the claims it is asked for and grants them), the claims combined
// by counting.Amounts. A review with violations (a constraint that cannot
// count the object) keeps at least what the object counted before
// (counting.KeepCounting), as the observer does.
func (r *Runner) measure(ctx context.Context, s *Suite, t *Test, c *Case, st Step, obj *unstructured.Unstructured, before map[ledger.BucketKey]int64) (map[ledger.BucketKey]int64, error) {
	object, err := r.writeReview(s, obj, &Admission{UID: observeUID}, nil)
	if err != nil {
		return nil, err
	}
	rec := &builtins.Recorder{}
	no := intstr.FromString("no")
	cr, err := r.review(builtins.WithRecorder(ctx, rec), s, t, c.Name+"#observe", object, c, st, []verify.Assertion{{Violations: &no}})
	if err != nil {
		return nil, err
	}
	counts, err := counting.Amounts(builtins.ClaimsOf(rec.Claims))
	if err != nil {
		return nil, fmt.Errorf("what %s counts: %w", obj.GetName(), err)
	}
	if cr.Error != nil {
		counts = counting.KeepCounting(before, counts)
	}
	return counts, nil
}

// write gives the bucket the sums over the case's objects and folds the
// reservations they now count, as the observer's write does
// (counting.PlanReservations). Nothing expires here: a case has no clock
// that passes a reservation's expiry, and no live object to read.
func (cl *cluster) write(ctx context.Context, key ledger.BucketKey) error {
	obs, err := cl.tally.Observation(key)
	if err != nil {
		return err
	}
	b, _, err := cl.store.Get(ctx, key)
	if err != nil {
		return err
	}
	reservations := make([]ledger.Reservation, 0, len(b.Reservations))
	for id, res := range b.Reservations {
		res.ClaimID = id
		reservations = append(reservations, res)
	}
	obs.Fold = counting.PlanReservations(cl.tally, key, reservations, nil, time.Now()).Fold
	_, err = cl.ledger.Observe(ctx, key, obs)
	return err
}
