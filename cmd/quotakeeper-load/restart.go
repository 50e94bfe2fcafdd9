package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
)

// Phase (r): what a manager restart costs once many objects are counted.
// The observer rebuilds every bucket's usage from a list before its first
// write, so a reservation made while it restarts is folded only once the
// rebuild is done: the time from the manager's start until a create made at
// that moment is counted is the rebuild time as a user sees it. Measured
// twice in the same run: with nothing counted yet (the baseline: process
// start, leader election, cache sync) and with cfg.restartObjects counted.
//
// The objects are created while no constraint matches them (at phase (a)'s
// speed rather than (c)'s), then the constraint is applied: the observer
// counting objects that predate a constraint is the issue's "pre-existing
// objects counted", and its time is printed too.

// restartPhase runs (r) and prints its figures.
func (h *harness) restartPhase(ctx context.Context) error {
	cfg := h.cfg
	namespaces, org, err := h.orgNamespaces(ctx, "r")
	if err != nil {
		return err
	}
	if err := h.grant(ctx, org, int64(cfg.restartObjects)+1000); err != nil {
		return err
	}
	quota := func() error {
		return h.constraint(ctx, "QuotaEntity", "load-r", namespaces, orgEntity())
	}
	if err := quota(); err != nil {
		return err
	}
	if err := h.ready(ctx, namespaces[0]); err != nil {
		return err
	}
	base, err := h.restartManager(ctx, namespaces, org, "probe-empty")
	if err != nil {
		return err
	}
	h.printf("(r) manager restart with 1 object counted: the create made at its start counted after %s\n", base.Round(10*time.Millisecond))

	// The objects, with no constraint matching them.
	if err := h.deleteConstraint(ctx, "load-r"); err != nil {
		return err
	}
	jobs := make([]job, cfg.restartObjects)
	for k := range jobs {
		jobs[k] = job{namespaces[k%len(namespaces)], fmt.Sprintf("bulk-%d", k), map[string]string{phaseLabel: "r"}}
	}
	r := h.drive(ctx, jobs)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	h.printf("(r) created %d objects with no constraint matching (%d failed) in %s (%.1f/s)\n",
		r.admitted, r.failed(), r.wall.Round(10*time.Millisecond), r.rate())
	h.printFailures(&r.failures)
	start := time.Now()
	if err := quota(); err != nil {
		return err
	}
	if _, err := h.settle(ctx, "(r) pre-existing objects", namespaces, org); err != nil {
		return err
	}
	h.printf("(r) %d objects that predate the constraint counted %s after it was applied\n",
		r.admitted+1, time.Since(start).Round(time.Second))
	h.managerMemory(ctx, "r-counted")

	full, err := h.restartManager(ctx, namespaces, org, "probe-full")
	if err != nil {
		return err
	}
	h.printf("(r) manager restart with %d objects counted: the create made at its start counted after %s; ratio to the restart with 1 object %.2f\n",
		r.admitted+2, full.Round(10*time.Millisecond), full.Seconds()/base.Seconds())
	h.managerMemory(ctx, "r-restarted")
	return nil
}

// restartManager stops the manager (SIGTERM: it releases its lease), starts
// it again, creates one object through admission at once, and returns how
// long after the start that object's reservation was folded into usage
// equal to the live objects (a capacity lease may still be held).
func (h *harness) restartManager(ctx context.Context, namespaces []string, org quotav1alpha1.ConsumerRef, probe string) (time.Duration, error) {
	key := ledger.NewBucketKey(ledgerconv.Consumer(org), resourceType, nil)
	name := client.ObjectKey{
		Namespace: quotav1alpha1.BucketNamespace(ledgerconv.ConsumerRef(key.Consumer), quotav1alpha1.DefaultSystemNamespace),
		Name:      key.Name(),
	}
	h.c.Manager.Stop()
	start := time.Now()
	if err := h.c.Restart(ctx, h.c.Manager); err != nil {
		return 0, err
	}
	profiled := h.startProfiles(ctx, "r-"+probe)
	defer profiled()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespaces[0], Name: probe, Labels: map[string]string{phaseLabel: "r"}}}
	if err := h.c.Client.Create(ctx, cm); err != nil {
		return 0, fmt.Errorf("create %s during the restart: %w", probe, err)
	}
	live, err := h.live(ctx, namespaces)
	if err != nil {
		return 0, err
	}
	err = localcluster.Poll(ctx, h.cfg.quiesce, "the object created at the restart counted", func() error {
		var b quotav1alpha1.AllowanceBucket
		if err := h.c.Client.Get(ctx, name, &b); err != nil {
			return err
		}
		// A capacity lease the replica holds is headroom, not an object
		// waiting to be counted (it goes back once idle, 10 s later).
		st := b.Status
		waiting := slices.DeleteFunc(slices.Clone(st.Reservations), func(r quotav1alpha1.Reservation) bool { return ledger.IsLease(r.ID) })
		if st.Allocated != live || len(waiting) != 0 {
			return fmt.Errorf("allocated %d of %d live, %d reservations besides leases", st.Allocated, live, len(waiting))
		}
		return nil
	})
	if err != nil {
		h.violate("(r) %v", err)
	}
	return time.Since(start), nil
}

// deleteConstraint deletes a QuotaEntity constraint and waits until it is gone.
func (h *harness) deleteConstraint(ctx context.Context, name string) error {
	c := &unstructured.Unstructured{}
	c.SetAPIVersion("constraints.gatekeeper.sh/v1beta1")
	c.SetKind("QuotaEntity")
	c.SetName(name)
	if err := h.c.Client.Delete(ctx, c); err != nil {
		return err
	}
	return localcluster.Poll(ctx, 2*time.Minute, "constraint "+name+" deleted", func() error {
		err := h.c.Client.Get(ctx, client.ObjectKey{Name: name}, c)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("still there")
		}
		return err
	})
}

// orgNamespaces creates -namespaces namespaces for phase id
// (load-<id>-NNN), each labelled into the phase's Organization (load-<id>),
// and returns them with it.
func (h *harness) orgNamespaces(ctx context.Context, id string) ([]string, quotav1alpha1.ConsumerRef, error) {
	org := quotav1alpha1.ConsumerRef{APIGroup: orgGroup, Kind: "Organization", Name: "load-" + id}
	labels := map[string]string{phaseLabel: id, quotav1alpha1.ConsumerLabelKey(orgGroup, "Organization"): org.Name}
	namespaces := make([]string, h.cfg.namespaces)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("load-%s-%03d", id, i)
		if err := h.c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaces[i], Labels: labels}}); err != nil {
			return nil, org, err
		}
	}
	return namespaces, org, nil
}

// orgEntity is the QuotaEntity parameters of the shared quota: 1 per object
// against the Organization its namespace is labelled into.
func orgEntity() map[string]any {
	return map[string]any{
		"resourceType": resourceType,
		"consumers":    []any{map[string]any{"apiGroup": orgGroup, "kind": "Organization"}},
	}
}
