package observer

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/dynwatch"
)

// Kinds the manager may not read ("blind" kinds): a constraint matches a
// kind whose get, list or watch RBAC refuses the manager. Its informer
// would retry its list forever and never sync, holding the worker that
// waits for it (at the initial load, the whole observer). So the observer
// asks first (dynwatch.CheckRead), bounds the wait for a sync, and keeps
// such a kind out of its view: it says so, in its log and in an Event on
// each constraint that matches the kind, and tries again every
// blindRetry. Meanwhile it fails closed: it writes no bucket of a
// resource type those constraints count, since a sum without the kind's
// objects would be too small (admission then decides against the last
// written usage, and the reservations it makes there wait for the kind,
// so quota is never handed out twice). Every other bucket goes on.

// blindRetry is how often a kind the manager may not read is tried again.
const blindRetry = 10 * time.Second

// informTimeout bounds one wait for a new informer's first list; the kind
// is blind until it ends. informGiveUp is how long the informer is kept
// listing before it is started again: a list that fails (a kind the access
// review allowed whose list still fails) is retried forever.
const (
	informTimeout = 30 * time.Second
	informGiveUp  = 10 * time.Minute
)

// reasonCannotReadKind is the reason of the Event on a constraint matching
// a kind the manager may not read.
const reasonCannotReadKind = "CannotReadKind"

// heldTypes are the resource types the observer does not write while some
// kinds are blind; all holds every bucket (a blind constraint whose
// resource types cannot be told from its parameters).
type heldTypes struct {
	types map[string]bool
	all   bool
}

func (h heldTypes) holds(resourceType string) bool { return h.all || h.types[resourceType] }

// setBlind records which kinds are blind now, says so for each that was not
// before, and works out the resource types to hold.
func (o *Observer) setBlind(ctx context.Context, blind map[schema.GroupKind]error) {
	held := heldTypes{types: map[string]bool{}}
	for gk := range blind {
		for _, c := range o.policy.constraintsMatching(gk) {
			types, known := o.resourceTypesOf(ctx, c)
			held.all = held.all || !known
			for _, t := range types {
				held.types[t] = true
			}
		}
	}
	o.mu.Lock()
	before := o.blind
	o.blind, o.held = blind, held
	o.mu.Unlock()
	for gk, err := range blind {
		if _, ok := before[gk]; ok {
			continue
		}
		var forbidden *dynwatch.ForbiddenError
		o.log.Error(err, "cannot read a kind quota constraints count: its objects are not counted, and the buckets of these resource types are not written until it can",
			"kind", gk.String(), "clusterRole", dynwatch.CountedKindsRole, "label", dynwatch.AggregateLabel+"=true",
			"forbidden", errors.As(err, &forbidden), "heldResourceTypes", held.list())
		for _, c := range o.policy.constraintsMatching(gk) {
			o.recorder.Eventf(c, nil, corev1.EventTypeWarning, reasonCannotReadKind, "Observe",
				"cannot count %s: %v; until then the buckets of %s are not written", gk.String(), err, strings.Join(held.list(), ", "))
		}
	}
	for gk := range before {
		if _, ok := blind[gk]; !ok {
			o.log.Info("reading a kind quota constraints count again", "kind", gk.String())
		}
	}
}

func (h heldTypes) list() []string {
	if h.all {
		return []string{"every resource type"}
	}
	return slices.Sorted(maps.Keys(h.types))
}

// held reports whether buckets of resourceType are held back. A
// delegation bucket always is: it counts hand-outs of a parent's cap, not
// objects, and the delegation controller is its observer
// (controllers/delegation_controller.go); this observer would find no
// object of its reservations it watches and expire them.
func (o *Observer) heldBack(resourceType string) bool {
	if _, ok := quotav1alpha1.DelegatedBase(resourceType); ok {
		return true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.held.holds(resourceType)
}

// resourceTypesOf returns the resource types a constraint counts, read from
// its parameters as the shipped templates take them (resourceType and
// consumers[].resourceType of QuotaEntity and QuotaAllocation; the
// requests of the ClaimCreationPolicy a QuotaClaimPolicy enforces), and
// whether that is all of them: false for a shape it does not know or a
// resource type a template renders.
func (o *Observer) resourceTypesOf(ctx context.Context, c *unstructured.Unstructured) ([]string, bool) {
	params, _, _ := unstructured.NestedMap(c.Object, "spec", "parameters")
	if name, ok := params["policy"].(string); ok {
		p := &quotav1alpha1.ClaimCreationPolicy{}
		if err := o.cache.Get(ctx, types.NamespacedName{Name: name}, p); err != nil {
			return nil, false
		}
		var out []string
		for _, r := range p.Spec.Target.ResourceClaimTemplate.Spec.Requests {
			if strings.Contains(r.ResourceType, "{{") {
				return nil, false
			}
			out = append(out, r.ResourceType)
		}
		return out, len(out) > 0
	}
	t, ok := params["resourceType"].(string)
	if !ok || t == "" {
		return nil, false
	}
	out := []string{t}
	consumers, _, _ := unstructured.NestedSlice(params, "consumers")
	for _, cm := range consumers {
		if m, ok := cm.(map[string]any); ok {
			if t, ok := m["resourceType"].(string); ok && t != "" {
				out = append(out, t)
			}
		}
	}
	return out, true
}
