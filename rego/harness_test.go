package rego_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	constraintclient "github.com/open-policy-agent/frameworks/constraint/pkg/client"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/drivers"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/drivers/rego"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/reviews"
	"github.com/open-policy-agent/frameworks/constraint/pkg/core/templates"
	"github.com/open-policy-agent/frameworks/constraint/pkg/types"
	"github.com/open-policy-agent/gatekeeper/v3/apis"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/reader"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/target"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/util"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/internal/preparedrego"
	quotarego "github.com/quotakeeper/quotakeeper/rego"
)

func TestMain(m *testing.M) {
	// Before any driver exists: drivers copy OPA's builtin table. No
	// process Env: each harness's reviews carry their own.
	if err := builtins.Register(nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// harness is a frameworks constraint client with the rego driver and
// Gatekeeper's admission target, as Gatekeeper builds it, holding one
// template (read from templates/, as shipped) and one constraint of it,
// over a fresh memory-store ledger.
type harness struct {
	t   testing.TB
	ctx context.Context
	// env is what the builtins decide against in this harness's reviews
	// (evalCtx): its ledger, and what a test adds.
	env    builtins.Env
	client *constraintclient.Client
	grants *ledger.GrantSet
	ledger *ledger.Ledger
	store  *ledger.MemoryStore
	kind   string // the template's constraint kind
}

func newHarness(t testing.TB, templateName string, params map[string]any) *harness {
	t.Helper()
	h := &harness{t: t, ctx: context.Background(), grants: ledger.NewGrantSet()}
	h.store = ledger.NewMemoryStore()
	h.ledger = ledger.New(h.store, h.grants)
	h.env.Ledger = h.ledger

	args := []rego.Arg{rego.Externs("inventory")}
	file := templateName + "/template.yaml"
	transform := func(u *unstructured.Unstructured) *unstructured.Unstructured { return u }
	switch mode(t) {
	case twinThroughProvider:
		// The template's twin, on a driver with External Data as a stock
		// Gatekeeper builds it, asking the provider over TLS.
		// It decides against the harness's Env, as the manager's provider
		// against the manager's.
		args = append(args, externalDataArgs(t, func() *builtins.Env { env := h.env; return &env })...)
		file = templateName + "/" + quotarego.ExternalDataFile
	case twinWithBuiltins:
		// The twin as the manager's observer loads it, on its driver.
		file = templateName + "/" + quotarego.ExternalDataFile
		transform = quotarego.ForBuiltins
	}
	var driver drivers.Driver = preparedrego.New()
	if m := mode(t); m != twinWithBuiltins && m != observersDriver {
		var err error
		if driver, err = rego.New(args...); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	h.client, err = constraintclient.NewClient(
		constraintclient.Targets(&target.K8sValidationTarget{}),
		constraintclient.Driver(driver),
		constraintclient.EnforcementPoints(util.WebhookEnforcementPoint, util.AuditEnforcementPoint),
	)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := readTemplateFile(t, file, transform)
	h.kind = tmpl.Spec.CRD.Spec.Names.Kind
	if _, err := h.client.AddTemplate(h.ctx, tmpl); err != nil {
		t.Fatalf("AddTemplate %s: %v", templateName, err)
	}
	h.addConstraint("quota", params)
	return h
}

// readTemplateFile reads templates/<file>, as transform makes it.
func readTemplateFile(t testing.TB, file string, transform func(*unstructured.Unstructured) *unstructured.Unstructured) *templates.ConstraintTemplate {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apis.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	objs, err := reader.ReadK8sResources(bytes.NewReader(mustRead(t, filepath.Join("..", "templates", file))))
	if err != nil || len(objs) != 1 {
		t.Fatalf("%s: %d objects, %v", file, len(objs), err)
	}
	tmpl, err := reader.ToTemplate(scheme, transform(objs[0]))
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func mustRead(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (h *harness) addConstraint(name string, params map[string]any) {
	h.t.Helper()
	c := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "constraints.gatekeeper.sh/v1beta1",
		"kind":       h.kind,
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"parameters": params},
	}}
	if _, err := h.client.AddConstraint(h.ctx, c); err != nil {
		h.t.Fatalf("AddConstraint: %v", err)
	}
}

func (h *harness) grant(id string, c ledger.Consumer, resourceType string, amount int64) {
	h.t.Helper()
	if err := h.grants.Set(ledger.Grant{ID: id, Consumer: c, ResourceType: resourceType, Amount: amount}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) usage(c ledger.Consumer, resourceType string) ledger.Usage {
	h.t.Helper()
	u, err := h.ledger.Usage(h.ctx, ledger.NewBucketKey(c, resourceType, nil))
	if err != nil {
		h.t.Fatal(err)
	}
	return u
}

// namespace adds a Namespace to the synced inventory (data.inventory), as
// Gatekeeper's sync does.
func (h *harness) namespace(name string, labels map[string]string) {
	h.t.Helper()
	if _, err := h.client.AddData(h.ctx, namespaceObject(name, labels)); err != nil {
		h.t.Fatal(err)
	}
}

func namespaceObject(name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Namespace")
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

type request struct {
	op         admissionv1.Operation
	uid        string // request uid; "" like an audit
	obj        map[string]any
	old        map[string]any // UPDATE
	dryRun     bool
	namespaces *unstructured.Unstructured // input.review.namespaceObject, as Gatekeeper's webhook attaches it
	user       authenticationv1.UserInfo  // who makes the request
}

// review runs one admission review and returns the violation messages, sorted.
func (h *harness) review(r request) []string {
	h.t.Helper()
	obj := &unstructured.Unstructured{Object: r.obj}
	gvk := obj.GroupVersionKind()
	req := &admissionv1.AdmissionRequest{
		UID:       k8stypes.UID(r.uid),
		Kind:      metaGVK(gvk),
		Operation: r.op,
		Name:      obj.GetName(),
		Namespace: obj.GetNamespace(),
		Object:    runtime.RawExtension{Raw: mustJSON(h.t, r.obj)},
		UserInfo:  r.user,
	}
	if r.old != nil {
		req.OldObject = runtime.RawExtension{Raw: mustJSON(h.t, r.old)}
	}
	if r.dryRun {
		req.DryRun = &r.dryRun
	}
	opts := []reviews.ReviewOpt{reviews.EnforcementPoint(util.WebhookEnforcementPoint)}
	if r.namespaces != nil {
		opts = append(opts, reviews.Namespace(r.namespaces.Object))
	}
	resp, err := h.client.Review(h.evalCtx(), target.AugmentedReview{AdmissionRequest: req, IsAdmission: true}, opts...)
	if err != nil {
		h.t.Fatalf("Review: %v", err)
	}
	return messages(resp.Results())
}

// evalCtx is the context of one review: h.ctx carrying a copy of h.env, so
// a test's later change to h.env does not reach an evaluation already
// holding it.
func (h *harness) evalCtx() context.Context {
	env := h.env
	return builtins.WithEnv(h.ctx, &env)
}

// audit reviews an existing object the way Gatekeeper's audit does: the
// object alone, no request uid, no operation.
func (h *harness) audit(obj map[string]any) []string {
	h.t.Helper()
	if mode(h.t) == twinThroughProvider {
		// The twins' reads without a request uid are keyed by the second
		// (rego.ExternalDataLib): an audit sees what changed before the
		// second it runs in.
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	}
	resp, err := h.client.Review(h.evalCtx(), target.AugmentedUnstructured{Object: unstructured.Unstructured{Object: obj}},
		reviews.EnforcementPoint(util.AuditEnforcementPoint))
	if err != nil {
		h.t.Fatalf("Review: %v", err)
	}
	return messages(resp.Results())
}

func messages(results []*types.Result) []string {
	out := []string{}
	for _, r := range results {
		out = append(out, r.Msg)
	}
	slices.Sort(out)
	return out
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func metaGVK(gvk schema.GroupVersionKind) metav1.GroupVersionKind {
	return metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
}

// seeEffective is how a denial in namespace ns ends: the EffectiveResourceGrant
// of consumer c for resourceType, and the command that shows it.
func seeEffective(ns string, c ledger.Consumer, resourceType string) string {
	return fmt.Sprintf("; see EffectiveResourceGrant %s/%s (kubectl quota usage -n %s)",
		ns, quotav1alpha1.EffectiveResourceGrantName(ledgerconv.ConsumerRef(c), resourceType), ns)
}
