package observer

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	constraintclient "github.com/open-policy-agent/frameworks/constraint/pkg/client"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/reviews"
	"github.com/open-policy-agent/frameworks/constraint/pkg/core/templates"
	"github.com/open-policy-agent/gatekeeper/v3/apis"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/reader"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/match"
	gktypes "github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/target"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/util"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/counted"
	"github.com/quotakeeper/quotakeeper/internal/preparedrego"
	quotarego "github.com/quotakeeper/quotakeeper/rego"
)

// Gatekeeper's kinds the observer reads.
var (
	templateGVK = schema.GroupVersionKind{Group: "templates.gatekeeper.sh", Version: "v1", Kind: "ConstraintTemplate"}
	// ConstraintGroupVersion is where Gatekeeper serves every template's
	// constraint kind.
	constraintGroupVersion = schema.GroupVersion{Group: "constraints.gatekeeper.sh", Version: "v1beta1"}
)

// policy is the frameworks constraint client loaded with the quota
// templates and their deny constraints, as Gatekeeper's webhook holds them.
// Safe for concurrent use.
type policy struct {
	client *constraintclient.Client
	// env is what the builtins decide against in this client's
	// evaluations: the ClaimCreationPolicies quota.policy_claim renders
	// (in observe mode no ledger is read).
	env    *builtins.Env
	scheme *runtime.Scheme
	// version counts changes to the loaded templates and constraints: an
	// object evaluated under the current version, unchanged since, would be
	// counted the same again.
	version atomic.Uint64

	mu          sync.Mutex
	templates   map[string]*templates.ConstraintTemplate // loaded, by template name
	constraints map[schema.GroupKind]map[string]*unstructured.Unstructured
	// matches: each loaded constraint's spec.match, parsed as Gatekeeper
	// parses it (nil: it could not be, and may match anything).
	matches map[string]*match.Match // by constraint kind/name
}

// newPolicy returns an empty policy whose evaluations decide against env.
// The process must have registered the builtins (builtins.Register) before
// it loads a template: each is compiled with OPA's builtin table as it is.
func newPolicy(env *builtins.Env) (*policy, error) {
	scheme := runtime.NewScheme()
	if err := apis.AddToScheme(scheme); err != nil {
		return nil, err
	}
	// The frameworks client as Gatekeeper's, with a driver that prepares
	// each template's query once: it evaluates once per object counted.
	c, err := constraintclient.NewClient(
		constraintclient.Targets(&target.K8sValidationTarget{}),
		constraintclient.Driver(preparedrego.New()),
		constraintclient.EnforcementPoints(util.WebhookEnforcementPoint),
	)
	if err != nil {
		return nil, err
	}
	return &policy{client: c, env: env, scheme: scheme, templates: map[string]*templates.ConstraintTemplate{},
		constraints: map[schema.GroupKind]map[string]*unstructured.Unstructured{}, matches: map[string]*match.Match{}}, nil
}

// setTemplate loads (or replaces) a quota template and returns its
// constraint kind.
func (p *policy) setTemplate(ctx context.Context, u *unstructured.Unstructured) (kind string, changed bool, err error) {
	// A template's External Data twin is counted with the builtins linked
	// into this process, as the template it is the twin of.
	tmpl, err := reader.ToTemplate(p.scheme, quotarego.ForBuiltins(u))
	if err != nil {
		return "", false, err
	}
	kind = tmpl.Spec.CRD.Spec.Names.Kind
	p.mu.Lock()
	old := p.templates[tmpl.Name]
	p.mu.Unlock()
	if old != nil && apiequality.Semantic.DeepEqual(old.Spec, tmpl.Spec) {
		// Gatekeeper writes a template's status as its pods come and go:
		// nothing to compile, nothing to evaluate again.
		return kind, false, nil
	}
	if _, err := p.client.AddTemplate(ctx, tmpl); err != nil {
		return "", false, err
	}
	p.mu.Lock()
	p.templates[tmpl.Name] = tmpl
	p.mu.Unlock()
	p.version.Add(1)
	return kind, true, nil
}

// removeTemplate unloads a template and its constraints; it reports whether
// one was loaded.
func (p *policy) removeTemplate(ctx context.Context, name string) (bool, error) {
	p.mu.Lock()
	tmpl, ok := p.templates[name]
	p.mu.Unlock()
	if !ok {
		return false, nil
	}
	if _, err := p.client.RemoveTemplate(ctx, tmpl); err != nil {
		return true, err
	}
	p.mu.Lock()
	delete(p.templates, name)
	delete(p.constraints, constraintGroupVersion.WithKind(tmpl.Spec.CRD.Spec.Names.Kind).GroupKind())
	p.mu.Unlock()
	p.version.Add(1)
	return true, nil
}

// templateNames are the names of the loaded templates.
func (p *policy) templateNames() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.templates))
}

// constraintNames are the names of the loaded constraints of kind gk.
func (p *policy) constraintNames(gk schema.GroupKind) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.constraints[gk]))
}

// templateOf returns the name of the loaded template whose constraint kind
// is kind, or "".
func (p *policy) templateOf(kind string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, t := range p.templates {
		if t.Spec.CRD.Spec.Names.Kind == kind {
			return name
		}
	}
	return ""
}

// samePolicy reports whether two versions of a constraint are the same
// policy: the same spec, labels and annotations (a QuotaBypass relaxes a
// constraint through its annotations). Gatekeeper's audit writes every
// constraint's status after each pass, once a minute by default: a new
// resourceVersion that changes nothing counted, on which the observer once
// reloaded the constraint and evaluated every object again.
func samePolicy(a, b *unstructured.Unstructured) bool {
	return apiequality.Semantic.DeepEqual(a.Object["spec"], b.Object["spec"]) &&
		maps.Equal(a.GetLabels(), b.GetLabels()) && maps.Equal(a.GetAnnotations(), b.GetAnnotations())
}

// setConstraint loads a deny constraint, or unloads it when it is gone
// (u nil) or does not deny. It reports whether the loaded set changed.
func (p *policy) setConstraint(ctx context.Context, gk schema.GroupKind, name string, u *unstructured.Unstructured) (bool, error) {
	p.mu.Lock()
	old := p.constraints[gk][name]
	p.mu.Unlock()
	if u == nil || !counted.Counts(u) {
		if old == nil {
			return false, nil
		}
		if _, err := p.client.RemoveConstraint(ctx, old); err != nil {
			return false, err
		}
		p.mu.Lock()
		delete(p.constraints[gk], name)
		delete(p.matches, gk.Kind+"/"+name)
		p.mu.Unlock()
		p.version.Add(1)
		return true, nil
	}
	if old != nil && samePolicy(old, u) {
		return false, nil
	}
	if _, err := p.client.AddConstraint(ctx, u); err != nil {
		return false, err
	}
	p.mu.Lock()
	if p.constraints[gk] == nil {
		p.constraints[gk] = map[string]*unstructured.Unstructured{}
	}
	p.constraints[gk][name] = u.DeepCopy()
	p.matches[gk.Kind+"/"+name] = parseMatch(u)
	p.mu.Unlock()
	p.version.Add(1)
	return true, nil
}

// parseMatch is a constraint's spec.match as Gatekeeper's matcher reads it;
// nil when it cannot be read (then it may match anything).
func parseMatch(c *unstructured.Unstructured) *match.Match {
	raw, found, err := unstructured.NestedMap(c.Object, "spec", "match")
	m := &match.Match{}
	if err != nil {
		return nil
	}
	if found {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, m); err != nil {
			return nil
		}
	}
	return m
}

// mayCount reports whether a loaded constraint matches obj, in namespace ns
// (nil: not known), with Gatekeeper's own matcher (the one its validation
// target uses): when none does, obj counts nothing, and the observer need
// not hold more of it than its metadata. A match that cannot be decided
// may count.
func (p *policy) mayCount(obj client.Object, ns *corev1.Namespace) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.matches {
		if m == nil {
			return true
		}
		if ok, err := match.Matches(m, &match.Matchable{Object: obj, Namespace: ns, Source: gktypes.SourceTypeOriginal}); ok || err != nil {
			return true
		}
	}
	return false
}

// scaleKind is what Gatekeeper reviews for an update of a scale
// subresource (kubectl scale, a HorizontalPodAutoscaler). A constraint lists
// it in match.kinds to check scales at admission; it is no object to watch:
// the workload a scale changes is counted through its own kind.
var scaleKind = schema.GroupKind{Group: "autoscaling", Kind: "Scale"}

// matchKinds returns the group/kinds the loaded constraints match, except
// autoscaling/Scale, and the constraints that match every kind (no
// match.kinds, or "*"), which the observer cannot watch.
func (p *policy) matchKinds() (kinds []schema.GroupKind, unwatchable []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[schema.GroupKind]bool{}
	for gk, byName := range p.constraints {
		for name, c := range byName {
			matched, every := constraintKinds(c)
			if every {
				unwatchable = append(unwatchable, gk.Kind+"/"+name)
			}
			for _, k := range matched {
				seen[k] = true
			}
		}
	}
	for gk := range seen {
		kinds = append(kinds, gk)
	}
	slices.SortFunc(kinds, func(a, b schema.GroupKind) int { return strings.Compare(a.String(), b.String()) })
	slices.Sort(unwatchable)
	return kinds, slices.Compact(unwatchable)
}

// ReadsAnnotation on a quota template declares what of an object its Rego
// reads: "metadata" (the shipped QuotaEntity: it counts 1 per object, by its
// namespace and labels) lets the observer watch the kinds only such
// templates' constraints match as metadata, so a large object (a Secret, a
// ConfigMap with data) costs the manager its metadata, not its content.
// Any other value, or none, watches whole objects.
const ReadsAnnotation = "quota.miloapis.com/reads"

// needsWholeObject reports whether a loaded constraint matching kind
// belongs to a template that may read more than an object's metadata.
func (p *policy) needsWholeObject(kind schema.GroupKind) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	metadataOnly := map[string]bool{}
	for _, t := range p.templates {
		metadataOnly[t.Spec.CRD.Spec.Names.Kind] = t.Annotations[ReadsAnnotation] == "metadata"
	}
	for gk, byName := range p.constraints {
		for _, c := range byName {
			if matched, _ := constraintKinds(c); slices.Contains(matched, kind) && !metadataOnly[gk.Kind] {
				return true
			}
		}
	}
	return false
}

// constraintsMatching returns copies of the loaded constraints whose
// match.kinds name kind.
func (p *policy) constraintsMatching(kind schema.GroupKind) []*unstructured.Unstructured {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*unstructured.Unstructured
	for _, byName := range p.constraints {
		for _, c := range byName {
			matched, _ := constraintKinds(c)
			if slices.Contains(matched, kind) {
				out = append(out, c.DeepCopy())
			}
		}
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int {
		return strings.Compare(a.GetKind()+"/"+a.GetName(), b.GetKind()+"/"+b.GetName())
	})
	return out
}

// constraintKinds returns the group/kinds a constraint's match.kinds name,
// except autoscaling/Scale, and whether an entry matches every kind (or
// there is none).
func constraintKinds(c *unstructured.Unstructured) (kinds []schema.GroupKind, every bool) {
	entries, _, _ := unstructured.NestedSlice(c.Object, "spec", "match", "kinds")
	if len(entries) == 0 {
		return nil, true
	}
	for _, e := range entries {
		em, _ := e.(map[string]any)
		groups, _, _ := unstructured.NestedStringSlice(em, "apiGroups")
		ks, _, _ := unstructured.NestedStringSlice(em, "kinds")
		if slices.Contains(groups, "*") || slices.Contains(ks, "*") || len(groups) == 0 || len(ks) == 0 {
			every = true
			continue
		}
		for _, g := range groups {
			for _, k := range ks {
				if gk := (schema.GroupKind{Group: g, Kind: k}); gk != scaleKind {
					kinds = append(kinds, gk)
				}
			}
		}
	}
	return kinds, every
}

// evaluate reviews obj as a CREATE of it, with the builtins in observe
// mode, and returns the claims the constraints asked to reserve (with
// their metadata) and the violations: a constraint that cannot count the
// object (an amount it cannot determine, a ClaimCreationPolicy that does
// not render for it), which asked to reserve nothing for it.
func (p *policy) evaluate(ctx context.Context, obj *unstructured.Unstructured, mapping *meta.RESTMapping, ns *corev1.Namespace) ([]builtins.RecordedClaim, []violation, error) {
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, nil, err
	}
	gvk, gvr := mapping.GroupVersionKind, mapping.Resource
	req := &admissionv1.AdmissionRequest{
		// Non-empty, so the library takes its reserve path.
		UID:       k8stypes.UID("observe-" + string(obj.GetUID())),
		Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:  metav1.GroupVersionResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource},
		Operation: admissionv1.Create,
		Name:      obj.GetName(),
		Namespace: obj.GetNamespace(),
		Object:    runtime.RawExtension{Raw: raw},
	}
	opts := []reviews.ReviewOpt{reviews.EnforcementPoint(util.WebhookEnforcementPoint)}
	if ns != nil {
		nsMap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ns)
		if err != nil {
			return nil, nil, err
		}
		// As Gatekeeper's webhook attaches it; the Go object carries no TypeMeta.
		nsMap["apiVersion"], nsMap["kind"] = "v1", "Namespace"
		opts = append(opts, reviews.Namespace(nsMap))
	}
	rec := &builtins.Recorder{}
	resp, err := p.client.Review(builtins.WithEnv(builtins.WithRecorder(ctx, rec), p.env),
		target.AugmentedReview{AdmissionRequest: req, Namespace: ns, IsAdmission: true}, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("review %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	if err := ctx.Err(); err != nil {
		// A canceled evaluation comes back as a result (eval_cancel_error),
		// not as an error: it is no answer about the object.
		return nil, nil, err
	}
	var violations []violation
	for _, r := range resp.Results() {
		violations = append(violations, violation{constraint: r.Constraint, msg: r.Msg})
	}
	slices.SortFunc(violations, func(a, b violation) int { return strings.Compare(a.msg, b.msg) })
	return rec.Claims, violations, nil
}

// violation is a constraint that could not count an object, and why.
type violation struct {
	constraint *unstructured.Unstructured
	msg        string
}
