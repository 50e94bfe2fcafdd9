package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/checkout"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/internal/localcluster"
)

//go:embed noop-template.yaml
var noopTemplate []byte

const (
	orgGroup     = "resourcemanager.miloapis.com"
	resourceType = "load.quotakeeper.io/configmaps"
	phaseLabel   = "load.quotakeeper.io/phase"
	prefillLabel = "load.quotakeeper.io/prefill"
	// inTreeHard is each namespace's ResourceQuota in phase (d): never reached.
	inTreeHard = 1_000_000
)

// order is the order phases run in: the three without quotakeeper quota
// first, so that the quota phases, not the baselines, carry the objects
// that earlier phases leave in the cluster; (h) right after (f), in the
// cluster (f)'s prefill left.
var order = []string{"a", "b", "d", "c", "e", "f", "h", "v"}

var titles = map[string]string{
	"a": "no matching constraint",
	"b": "no-op constraint",
	"c": "shared Organization quota",
	"d": "in-tree ResourceQuota per namespace",
	"e": "shared quota, limit = half the creates",
	"f": "shared quota, prefilled",
	"h": "shared quota, after the prefill",
	"v": "shared quota with ResourceClaim views",
}

// sharedQuota: the phases that create against the shared Organization quota.
func sharedQuota(id string) bool {
	return id == "c" || id == "e" || id == "f" || id == "h" || id == "v"
}

// result is one measured run.
type result struct {
	id                 string
	attempts, admitted int
	denied             int // refused by quota: the expected answer in (e)
	failures           errorTally
	wall               time.Duration
	latencies          []time.Duration // every attempt, answered or not
	// provider is the External Data provider's side of the phase (stock
	// mode): its requests and their latency.
	provider providerLatency
	// settled: the bucket counted exactly the live objects, nothing
	// reserved, within -quiesce-timeout (quota phases).
	settled bool
	// exact: in (e), exactly the limit admitted and live.
	exact bool
}

func (r *result) answered() int      { return r.admitted + r.denied }
func (r *result) rate() float64      { return rate(r.answered(), r.wall) }
func (r *result) failed() int        { return r.failures.total() }
func (r *result) title() string      { return fmt.Sprintf("(%s) %s", r.id, titles[r.id]) }
func (r *result) p(q float64) string { return ms(percentile(r.latencies, q)) }

type harness struct {
	cfg        config
	mode       string // modeBuiltins, modeLeases or modeExternalData
	replicas   int
	c          *localcluster.Cluster
	out        io.Writer
	violations []string
	profiles   profileTargets
	// results are the measured phases, by id.
	results map[string]*result
}

func (h *harness) printf(format string, args ...any) { fmt.Fprintf(h.out, format, args...) }

func (h *harness) violate(format string, args ...any) {
	v := fmt.Sprintf("[%s, %d replica(s)] ", h.mode, h.replicas) + fmt.Sprintf(format, args...)
	h.violations = append(h.violations, v)
	h.printf("    INVARIANT FAILED: %s\n", fmt.Sprintf(format, args...))
}

// runOnce brings up a cluster with replicas Gatekeepers in admission mode,
// runs the selected phases on it and prints their figures; it returns the
// run, with its results and the invariants that failed. An error means the
// run itself could not be made.
func runOnce(ctx context.Context, cfg config, mode string, replicas int) (*harness, error) {
	dir := filepath.Join(cfg.dir, fmt.Sprintf("replicas-%d", replicas))
	gatekeeper := cfg.gatekeeper
	if mode == modeExternalData {
		dir = filepath.Join(cfg.dir, fmt.Sprintf("%s-replicas-%d", mode, replicas))
		gatekeeper = cfg.stockGatekeeper
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	h := &harness{cfg: cfg, mode: mode, replicas: replicas, out: os.Stdout, results: map[string]*result{}}
	total := cfg.namespaces * cfg.creates
	h.printf("\n== %s, %d Gatekeeper replica(s): %d namespaces × %d creates = %d per phase, %d concurrent creators; prefill %d; audit every %s; logs in %s\n",
		h.modeTitle(), replicas, cfg.namespaces, cfg.creates, total, cfg.creators, cfg.prefill, cfg.audit, dir)
	start := time.Now()
	opts := localcluster.Options{
		Dir: dir, Gatekeeper: gatekeeper, GatekeeperReplicas: replicas, Manager: cfg.manager, ExternalData: mode == modeExternalData,
		AuditInterval: cfg.audit, ManagerArgs: cfg.managerArgs, ManagerEnv: cfg.managerEnv, GatekeeperArgs: slices.Clone(cfg.gatekeeperArgs),
	}
	// Capacity leases are on by default: builtins and externalData measure
	// the synchronous path (the plugin's, the provider's), leases the
	// default.
	switch mode {
	case modeLeases:
		opts.GatekeeperArgs = append(opts.GatekeeperArgs, "--quota-capacity-leases=true")
	case modeBuiltins:
		opts.GatekeeperArgs = append(opts.GatekeeperArgs, "--quota-capacity-leases=false")
	case modeExternalData:
		opts.ManagerArgs = append(slices.Clone(opts.ManagerArgs), "--capacity-leases=false")
	}
	if cfg.pprofDir != "" {
		var err error
		if err = os.MkdirAll(cfg.pprofDir, 0o755); err != nil {
			return nil, err
		}
		var gk, mgr []string
		if h.profiles, gk, mgr, err = newProfileTargets(); err != nil {
			return nil, err
		}
		opts.GatekeeperArgs, opts.ManagerArgs = append(opts.GatekeeperArgs, gk...), append(opts.ManagerArgs, mgr...)
	}
	c, err := localcluster.Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("start cluster (logs in %s): %w", dir, err)
	}
	defer c.Stop()
	h.c = c
	if err := h.install(ctx); err != nil {
		return nil, fmt.Errorf("install (logs in %s): %w", dir, err)
	}
	h.printf("cluster up and policies installed in %s\n", time.Since(start).Round(time.Second))

	for _, id := range order {
		if !cfg.phases[id] {
			continue
		}
		r, err := h.phase(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("phase (%s) (logs in %s): %w", id, dir, err)
		}
		h.results[id] = r
	}
	if cfg.phases["g"] {
		if err := h.downtimePhase(ctx); err != nil {
			return nil, fmt.Errorf("phase (g) (logs in %s): %w", dir, err)
		}
	}
	if cfg.phases["r"] {
		if err := h.restartPhase(ctx); err != nil {
			return nil, fmt.Errorf("phase (r) (logs in %s): %w", dir, err)
		}
	}
	h.summary(h.results)
	if data, err := os.ReadFile(c.Manager.LogPath); err == nil {
		h.printf("manager log: %d lines report a bucket write conflict (\"Operation cannot be fulfilled\")\n",
			bytes.Count(data, []byte("Operation cannot be fulfilled")))
	}
	return h, nil
}

// modeTitle says which Gatekeeper decides quota in this run.
func (h *harness) modeTitle() string {
	switch h.mode {
	case modeExternalData:
		return "stock Gatekeeper, External Data (the manager's provider decides)"
	case modeLeases:
		return "Gatekeeper with the plugin (builtins), capacity leases on"
	}
	return "Gatekeeper with the plugin (builtins)"
}

// install applies Gatekeeper's namespace sync, the QuotaEntity template, the
// no-op template and the registration of the counted resource type.
func (h *harness) install(ctx context.Context) error {
	root, err := checkout.Root()
	if err != nil {
		return err
	}
	objs, err := localcluster.ReadObjects(
		filepath.Join(root, "config", "gatekeeper", "syncset.yaml"),
		filepath.Join(root, "templates", "quotaentity", h.templateFile()))
	if err != nil {
		return err
	}
	noop, err := localcluster.DecodeObjects("the no-op template", noopTemplate)
	if err != nil {
		return err
	}
	if err := h.c.Apply(ctx, 2*time.Minute, append(objs, noop...)...); err != nil {
		return err
	}
	reg := &quotav1alpha1.ResourceRegistration{
		ObjectMeta: metav1.ObjectMeta{Name: "load-configmaps"},
		Spec: quotav1alpha1.ResourceRegistrationSpec{
			ConsumerTypeRef: quotav1alpha1.ConsumerTypeRef{APIGroup: orgGroup, Kind: "Organization"},
			Type:            quotav1alpha1.RegistrationTypeEntity, ResourceType: resourceType, BaseUnit: "configmap",
			ClaimingResources: []quotav1alpha1.GroupKind{{Kind: "ConfigMap"}},
		},
	}
	if err := h.c.Client.Create(ctx, reg); err != nil {
		return err
	}
	return localcluster.Poll(ctx, time.Minute, "registration Active", func() error {
		got := &quotav1alpha1.ResourceRegistration{}
		if err := h.c.Client.Get(ctx, client.ObjectKeyFromObject(reg), got); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, quotav1alpha1.ConditionActive) {
			return fmt.Errorf("conditions %+v", got.Status.Conditions)
		}
		return nil
	})
}

// templateFile is the QuotaEntity template the mode runs: the template, or
// on a stock Gatekeeper its External Data twin.
func (h *harness) templateFile() string {
	if h.mode == modeExternalData {
		return "template-externaldata.yaml"
	}
	return "template.yaml"
}

// phase sets phase id up on namespaces of its own, measures it and checks it.
func (h *harness) phase(ctx context.Context, id string) (*result, error) {
	cfg := h.cfg
	total := cfg.namespaces * cfg.creates
	namespaces := make([]string, cfg.namespaces)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("load-%s-%03d", id, i)
	}
	org := quotav1alpha1.ConsumerRef{APIGroup: orgGroup, Kind: "Organization", Name: "load-" + id}
	labels := map[string]string{phaseLabel: id}
	if sharedQuota(id) {
		labels[quotav1alpha1.ConsumerLabelKey(orgGroup, "Organization")] = org.Name
	}
	for _, ns := range namespaces {
		if err := h.c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil {
			return nil, err
		}
	}
	limit := cfg.grant
	switch id {
	case "b":
		if err := h.constraint(ctx, "LoadNoop", "load-b", namespaces, nil); err != nil {
			return nil, err
		}
	case "d":
		if err := h.resourceQuotas(ctx, namespaces); err != nil {
			return nil, err
		}
	case "c", "e", "f", "h", "v":
		switch id {
		case "e":
			limit = int64(total / 2)
		case "f":
			limit = max(limit, int64(cfg.prefill+total))
		}
		if err := h.grant(ctx, org, limit); err != nil {
			return nil, err
		}
		parameters := orgEntity()
		if id == "v" {
			parameters["claimViews"] = true // a ResourceClaim per object, Milo's way
		}
		if err := h.constraint(ctx, "QuotaEntity", "load-"+id, namespaces, parameters); err != nil {
			return nil, err
		}
	}
	if err := h.ready(ctx, namespaces[0]); err != nil {
		return nil, err
	}
	if sharedQuota(id) {
		// As (d) starts with every ResourceQuota's status written: the
		// manager's one-time work for 100 new namespaces (their effective
		// grants) is onboarding, not the cost of a create.
		if err := h.effectiveGrants(ctx, namespaces, org, limit); err != nil {
			return nil, err
		}
	}
	if id == "f" && cfg.prefill > 0 {
		if err := h.prefill(ctx, namespaces, org); err != nil {
			return nil, err
		}
	}

	var jobs []job
	for j := range cfg.creates {
		for _, ns := range namespaces {
			jobs = append(jobs, job{ns, fmt.Sprintf("cm-%d", j), map[string]string{phaseLabel: id}})
		}
	}
	audit, err := h.afterAudit(ctx)
	if err != nil {
		return nil, err
	}
	// Writes first: reading them costs the API server a /metrics request,
	// which is not the phase's CPU.
	writesBefore := h.writes(ctx)
	providerBefore := h.providerBuckets(ctx)
	before := h.cpu()
	profiled := h.startProfiles(ctx, id)
	r := h.drive(ctx, jobs)
	r.id = id
	after := h.cpu()
	profiled()
	r.provider = h.providerLatency(providerBefore, h.providerBuckets(ctx))
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	h.printf("%s: %d creates, %d admitted, %d denied by quota, %d failed in %s: %.1f/s, p50 %s, p99 %s\n",
		r.title(), r.attempts, r.admitted, r.denied, r.failed(), r.wall.Round(10*time.Millisecond), r.rate(), r.p(50), r.p(99))
	h.printf("    started just after a Gatekeeper audit pass, which took %s\n", audit)
	if r.provider.requests > 0 {
		h.printf("    External Data provider: %d requests answered, p50 %s, p99 %s (the manager's quotakeeper_external_data_request_duration_seconds)\n",
			r.provider.requests, r.provider.p50, r.provider.p99)
	}
	h.perCreate(before, after, r)
	h.managerMemory(ctx, id)
	h.printWrites(writesBefore, h.writes(ctx))
	h.printFailures(&r.failures)

	switch id {
	case "d":
		if err := h.checkInTree(ctx, namespaces); err != nil {
			return nil, err
		}
	case "c", "e", "f", "h", "v":
		if id == "e" {
			live, err := h.live(ctx, namespaces)
			if err != nil {
				return nil, err
			}
			verdict := "exactly the limit"
			switch {
			case live > limit:
				verdict = fmt.Sprintf("OVER the limit by %d", live-limit)
			case live < limit:
				verdict = fmt.Sprintf("under the limit by %d", limit-live)
			}
			h.printf("    admitted %d (live objects %d) of limit %d: %s\n", r.admitted, live, limit, verdict)
			r.exact = live == limit && int64(r.admitted) == limit
			if live > limit || int64(r.admitted) > limit {
				h.violate("(e) admitted %d, %d live, over the limit %d", r.admitted, live, limit)
			}
		}
		if r.settled, err = h.settle(ctx, "("+id+")", namespaces, org); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (h *harness) printFailures(t *errorTally) {
	for _, line := range t.top(4, 300) {
		h.printf("    failure: %s\n", line)
	}
}

// job is one create.
type job struct {
	namespace, name string
	labels          map[string]string
}

// drive runs jobs with cfg.creators concurrent creators and measures them.
func (h *harness) drive(ctx context.Context, jobs []job) *result {
	queue := make(chan job, len(jobs))
	for _, j := range jobs {
		queue <- j
	}
	close(queue)
	return h.driveQueue(ctx, queue, len(jobs))
}

// driveQueue runs the jobs queue yields until it is closed, with
// cfg.creators concurrent creators, and measures them; n is how many are
// expected (0: unknown).
func (h *harness) driveQueue(ctx context.Context, queue <-chan job, n int) *result {
	r := &result{attempts: n, latencies: make([]time.Duration, 0, n)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range h.cfg.creators {
		wg.Go(func() {
			for j := range queue {
				if ctx.Err() != nil {
					return
				}
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Namespace: j.namespace, Name: j.name, Labels: j.labels},
					Data:       map[string]string{"load": "1"},
				}
				rctx, cancel := context.WithTimeout(ctx, h.cfg.requestTimeout)
				t0 := time.Now()
				err := h.c.Client.Create(rctx, cm)
				d := time.Since(t0)
				cancel()
				mu.Lock()
				r.latencies = append(r.latencies, d)
				switch {
				case err == nil:
					r.admitted++
				case isQuotaDenial(err):
					r.denied++
				default:
					r.failures.add(err.Error(), j.namespace, j.name)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.wall = time.Since(start)
	r.attempts = len(r.latencies)
	return r
}

// isQuotaDenial: refused because quota ran out, by quotakeeper ("quota
// exceeded for …") or in-tree ResourceQuota ("exceeded quota: …").
func isQuotaDenial(err error) bool {
	msg := err.Error()
	return apierrors.IsForbidden(err) && (strings.Contains(msg, "quota exceeded for") || strings.Contains(msg, "exceeded quota:"))
}

// prefill creates cfg.prefill objects through the same quota path, spread
// over the phase's namespaces, and waits until they are counted.
func (h *harness) prefill(ctx context.Context, namespaces []string, org quotav1alpha1.ConsumerRef) error {
	jobs := make([]job, h.cfg.prefill)
	for k := range jobs {
		jobs[k] = job{namespaces[k%len(namespaces)], fmt.Sprintf("prefill-%d", k),
			map[string]string{phaseLabel: "f", prefillLabel: "true"}}
	}
	r := h.drive(ctx, jobs)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	h.printf("(f) prefill: %d creates, %d admitted, %d denied by quota, %d failed in %s (%.1f/s, p50 %s, p99 %s)\n",
		r.attempts, r.admitted, r.denied, r.failed(), r.wall.Round(10*time.Millisecond), r.rate(), r.p(50), r.p(99))
	h.printFailures(&r.failures)
	_, err := h.settle(ctx, "(f) prefill", namespaces, org)
	return err
}

// settle waits until the shared bucket of org counts exactly the live
// objects in namespaces and holds no reservations, then prints the bucket's
// figures. Not settling within cfg.quiesce is an invariant failure.
func (h *harness) settle(ctx context.Context, what string, namespaces []string, org quotav1alpha1.ConsumerRef) (bool, error) {
	key := ledger.NewBucketKey(ledgerconv.Consumer(org), resourceType, nil)
	name := client.ObjectKey{
		Namespace: quotav1alpha1.BucketNamespace(ledgerconv.ConsumerRef(key.Consumer), quotav1alpha1.DefaultSystemNamespace),
		Name:      key.Name(),
	}
	start := time.Now()
	var b quotav1alpha1.AllowanceBucket
	var live int64
	settled := false
	for {
		var err error
		if live, err = h.live(ctx, namespaces); err != nil {
			return false, err
		}
		b = quotav1alpha1.AllowanceBucket{} // Get leaves fields the answer omits untouched
		if err := h.c.Client.Get(ctx, name, &b); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		st := b.Status
		if st.Allocated == live && st.Reserved == 0 && len(st.Reservations) == 0 {
			settled = true
			break
		}
		if time.Since(start) > h.cfg.quiesce {
			break
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	size, err := h.serializedSize(ctx, name)
	if err != nil {
		return false, err
	}
	st := b.Status
	h.printf("    %s after %s: used (allocated) %d, live objects %d, reserved %d (%d reservation entries), %d counted objects, limit %d; AllowanceBucket %d bytes\n",
		map[bool]string{true: "settled", false: "NOT settled"}[settled], time.Since(start).Round(time.Second),
		st.Allocated, live, st.Reserved, len(st.Reservations), st.ClaimCount, st.Limit, size)
	if !settled {
		h.violate("%s: after %s used %d != live %d or reservations not drained (reserved %d, %d entries)",
			what, h.cfg.quiesce, st.Allocated, live, st.Reserved, len(st.Reservations))
	}
	return settled, nil
}

// serializedSize is the AllowanceBucket's size as JSON, the form the
// apiserver stores custom resources in.
func (h *harness) serializedSize(ctx context.Context, name client.ObjectKey) (int, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(quotav1alpha1.GroupVersion.WithKind("AllowanceBucket"))
	if err := h.c.Client.Get(ctx, name, u); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, err
	}
	data, err := json.Marshal(u.Object)
	return len(data), err
}

// live counts every ConfigMap in namespaces afresh from the apiserver,
// whoever made it: what the quota counts.
func (h *harness) live(ctx context.Context, namespaces []string) (int64, error) {
	var (
		mu    sync.Mutex
		total int64
		first error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, 8)
	)
	for _, ns := range namespaces {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
			err := h.c.Client.List(ctx, list, client.InNamespace(ns))
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			total += int64(len(list.Items))
		})
	}
	wg.Wait()
	return total, first
}

// resourceQuotas gives each namespace a ResourceQuota on ConfigMaps that is
// never reached. The test bed runs no resourcequota controller, so the
// harness writes each quota's initial status as that controller would (hard
// from spec, nothing used); from then on the apiserver's ResourceQuota
// admission charges status itself, which is the in-tree path measured.
func (h *harness) resourceQuotas(ctx context.Context, namespaces []string) error {
	hard := corev1.ResourceList{"count/configmaps": *resource.NewQuantity(inTreeHard, resource.DecimalSI)}
	for _, ns := range namespaces {
		q := &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "load", Namespace: ns},
			Spec:       corev1.ResourceQuotaSpec{Hard: hard},
		}
		if err := h.c.Client.Create(ctx, q); err != nil {
			return err
		}
		q.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{"count/configmaps": resource.MustParse("0")}}
		if err := h.c.Client.Status().Update(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// checkInTree prints what in-tree quota charged against the live objects:
// informational (a charge whose create then fails is only corrected by the
// resourcequota controller, which the test bed does not run).
func (h *harness) checkInTree(ctx context.Context, namespaces []string) error {
	var used int64
	for _, ns := range namespaces {
		q := &corev1.ResourceQuota{}
		if err := h.c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "load"}, q); err != nil {
			return err
		}
		u := q.Status.Used["count/configmaps"]
		used += u.Value()
	}
	live, err := h.live(ctx, namespaces)
	if err != nil {
		return err
	}
	h.printf("    in-tree quota charged %d for %d live objects\n", used, live)
	return nil
}

// grant gives org limit of the counted resource type and waits until the
// grant is Active.
func (h *harness) grant(ctx context.Context, org quotav1alpha1.ConsumerRef, limit int64) error {
	g := &quotav1alpha1.ResourceGrant{
		ObjectMeta: metav1.ObjectMeta{Name: org.Name, Namespace: quotav1alpha1.BucketNamespace(org, quotav1alpha1.DefaultSystemNamespace)},
		Spec: quotav1alpha1.ResourceGrantSpec{
			ConsumerRef: org,
			Allowances: []quotav1alpha1.Allowance{{
				ResourceType: resourceType, Buckets: []quotav1alpha1.GrantBucket{{Amount: limit}},
			}},
		},
	}
	if err := h.c.Client.Create(ctx, g); err != nil {
		return err
	}
	return localcluster.Poll(ctx, time.Minute, "grant "+g.Name+" Active", func() error {
		got := &quotav1alpha1.ResourceGrant{}
		if err := h.c.Client.Get(ctx, client.ObjectKeyFromObject(g), got); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, quotav1alpha1.ConditionActive) {
			return fmt.Errorf("conditions %+v", got.Status.Conditions)
		}
		return nil
	})
}

// effectiveGrants waits until every namespace holds org's effective grant
// with the limit.
func (h *harness) effectiveGrants(ctx context.Context, namespaces []string, org quotav1alpha1.ConsumerRef, limit int64) error {
	name := quotav1alpha1.EffectiveResourceGrantName(org, resourceType)
	return localcluster.Poll(ctx, 2*time.Minute, "effective grant "+name+" in every namespace", func() error {
		for _, ns := range namespaces {
			erg := &quotav1alpha1.EffectiveResourceGrant{}
			if err := h.c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, erg); err != nil {
				return err
			}
			if erg.Status.TotalLimit != limit {
				return fmt.Errorf("%s/%s: limit %d, want %d", ns, name, erg.Status.TotalLimit, limit)
			}
		}
		return nil
	})
}

// constraint applies a constraint of kind over ConfigMaps in namespaces and
// waits until every Gatekeeper replica enforces it.
func (h *harness) constraint(ctx context.Context, kind, name string, namespaces []string, parameters map[string]any) error {
	nss := make([]any, len(namespaces))
	for i, ns := range namespaces {
		nss[i] = ns
	}
	spec := map[string]any{
		"match": map[string]any{
			"kinds":      []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"ConfigMap"}}},
			"namespaces": nss,
		},
	}
	if parameters != nil {
		spec["parameters"] = parameters
	}
	c := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "constraints.gatekeeper.sh/v1beta1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
	if err := h.c.Apply(ctx, 2*time.Minute, c); err != nil {
		return err
	}
	// Enforced includes counted by the manager: in phase (r) 100,000
	// objects that predate the constraint, which on a busy machine takes
	// more than two minutes.
	return h.c.WaitEnforced(ctx, h.cfg.quiesce, c.GroupVersionKind(), name)
}

// ready waits until a dry-run create in ns is admitted: the whole admission
// path (Gatekeeper, the constraint, the grant in Gatekeeper's mirror) is up,
// and nothing is counted or reserved for a dry run.
func (h *harness) ready(ctx context.Context, ns string) error {
	return localcluster.Poll(ctx, 2*time.Minute, "a dry-run create admitted in "+ns, func() error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ready-probe"}}
		return h.c.Client.Create(ctx, cm, client.DryRunAll)
	})
}

// summary prints the phases as a table and the ratios the issue judges by.
func (h *harness) summary(results map[string]*result) {
	h.printf("\nsummary, %d Gatekeeper replica(s):\n", h.replicas)
	tw := tabwriter.NewWriter(h.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PHASE\tCREATES\tADMITTED\tDENIED\tFAILED\tRATE/S\tP50\tP99")
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "h", "v"} {
		r, ok := results[id]
		if !ok {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%s\t%s\n", r.title(), r.attempts, r.admitted, r.denied, r.failed(), r.rate(), r.p(50), r.p(99))
	}
	_ = tw.Flush()
	rt := func(id string) (float64, bool) {
		r, ok := results[id]
		if !ok {
			return 0, false
		}
		return r.rate(), true
	}
	ratioOf := func(a, b string) string {
		ra, oka := rt(a)
		rb, okb := rt(b)
		return ratio(ra, rb, oka, okb)
	}
	h.printf("ratios: c/d %s  c/b %s  f/c %s  f/h %s  v/c %s\n", ratioOf("c", "d"), ratioOf("c", "b"), ratioOf("f", "c"), ratioOf("f", "h"), ratioOf("v", "c"))
}
