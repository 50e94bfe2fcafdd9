package plugin

// The break-glass audit. A QuotaBypass relaxes quota constraints to warn
// (the manager does it; package bypass), so Gatekeeper admits a request
// over quota with a warning "[<constraint>] <quota message>". Which
// constraint said what is only known to Gatekeeper's validation handler,
// after the Rego ran (the template's Rego sees input.review and
// input.parameters, not the constraint), so the plugin wraps that handler:
// every admitted request with a warning from a constraint an active bypass
// relaxed is logged and recorded as a QuotaBypassed Event on the bypass,
// with the user, the operation, the object, the message and the bypass's
// reason.
//
// The wrapper also ends a bypass on time when the manager cannot: a warning
// from a constraint that an ended bypass (expired, or being deleted; its
// finalizer keeps it until the manager has restored the constraint) still
// lists as relaxed turns the response into the denial the constraint would
// have given.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	gkwebhook "github.com/open-policy-agent/gatekeeper/v3/pkg/webhook"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/eventnote"
)

// gatekeeperAdmitPath is where Gatekeeper serves its validation webhook.
const gatekeeperAdmitPath = "/v1/admit"

// wrapPolicyWebhook replaces Gatekeeper's AddPolicyWebhook in its webhook
// functions with one that wraps the handler it registers. It reports
// whether it found it.
func wrapPolicyWebhook() bool {
	target := reflect.ValueOf(gkwebhook.AddPolicyWebhook).Pointer()
	for i, f := range gkwebhook.AddToManagerFuncs {
		if reflect.ValueOf(f).Pointer() == target {
			gkwebhook.AddToManagerFuncs[i] = func(mgr manager.Manager, deps gkwebhook.Dependencies) error {
				return gkwebhook.AddPolicyWebhook(auditingManager{Manager: mgr}, deps)
			}
			return true
		}
	}
	return false
}

// auditingManager hands AddPolicyWebhook a webhook server that wraps the
// validation handler, and serves it on warm workers.
type auditingManager struct{ manager.Manager }

func (m auditingManager) GetWebhookServer() webhook.Server {
	return auditingServer{Server: m.Manager.GetWebhookServer(), mgr: m.Manager}
}

type auditingServer struct {
	webhook.Server
	mgr manager.Manager
}

func (s auditingServer) Register(path string, hook http.Handler) {
	if wh, ok := hook.(*admission.Webhook); ok && path == gatekeeperAdmitPath {
		// The release sees the response the API server gets, the
		// auditor's denials included (denied.go); outside it, only the
		// words of a halt are rewritten (undecided.go).
		wh.Handler = ReadableFailures{Handler: &ReleaseOnDenial{Handler: &BypassAuditor{
			Handler:  wh.Handler,
			Reader:   s.mgr.GetCache(),
			Recorder: s.mgr.GetEventRecorder("quotakeeper-gatekeeper"),
			Now:      time.Now,
		}}}
		// Reviews run on warm workers (workers.go).
		hook = newWarmWorkers(workerIdle).handler(hook)
	}
	s.Server.Register(path, hook)
}

// BypassAuditor wraps Gatekeeper's validation handler (see above).
type BypassAuditor struct {
	admission.Handler
	// Reader lists QuotaBypasses (Gatekeeper's manager cache).
	Reader   client.Reader
	Recorder events.EventRecorder
	Now      func() time.Time
}

func (a *BypassAuditor) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp := a.Handler.Handle(ctx, req)
	if !resp.Allowed || len(resp.Warnings) == 0 {
		return resp
	}
	var bypasses quotav1alpha1.QuotaBypassList
	if err := a.Reader.List(ctx, &bypasses); err != nil {
		// Cannot tell an ended bypass from an active one: deny, as the
		// constraints would without one.
		return admission.Denied(fmt.Sprintf("quota: cannot read the QuotaBypasses: %v; %s", err, strings.Join(resp.Warnings, "; ")))
	}
	if len(bypasses.Items) == 0 {
		return resp
	}
	now := a.Now()
	var ended []string
	for _, w := range resp.Warnings {
		name, msg, ok := splitWarning(w)
		if !ok {
			continue
		}
		if b := find(bypasses.Items, func(b *quotav1alpha1.QuotaBypass) bool { return b.ActiveAt(now) && names(b, name) }); b != nil {
			a.record(ctx, req, b, name, msg)
			continue
		}
		if find(bypasses.Items, func(b *quotav1alpha1.QuotaBypass) bool { return !b.ActiveAt(now) && relaxed(b, name) }) != nil {
			ended = append(ended, w)
		}
	}
	if len(ended) > 0 {
		return admission.Denied(strings.Join(ended, "\n"))
	}
	return resp
}

// splitWarning splits Gatekeeper's "[<constraint>] <message>".
func splitWarning(w string) (constraint, msg string, ok bool) {
	if !strings.HasPrefix(w, "[") {
		return "", "", false
	}
	constraint, msg, ok = strings.Cut(w[1:], "] ")
	return constraint, msg, ok
}

func find(bs []quotav1alpha1.QuotaBypass, pred func(*quotav1alpha1.QuotaBypass) bool) *quotav1alpha1.QuotaBypass {
	for i := range bs {
		if pred(&bs[i]) {
			return &bs[i]
		}
	}
	return nil
}

// names reports whether b relaxed the constraint called name: its status
// lists it, or its spec names it exactly. Gatekeeper's warning carries the
// constraint's name, not its kind.
func names(b *quotav1alpha1.QuotaBypass, name string) bool {
	if relaxed(b, name) {
		return true
	}
	for _, c := range b.Spec.Constraints {
		if c.Name == name {
			return true
		}
	}
	return false
}

func relaxed(b *quotav1alpha1.QuotaBypass, name string) bool {
	for _, r := range b.Status.Relaxed {
		if r.Name == name {
			return true
		}
	}
	return false
}

// record logs a bypassed admission and records it as a QuotaBypassed Event
// on the bypass, the admitted object as the Event's related object.
func (a *BypassAuditor) record(ctx context.Context, req admission.Request, b *quotav1alpha1.QuotaBypass, constraint, msg string) {
	if req.DryRun != nil && *req.DryRun {
		return
	}
	kind := req.Kind.Kind
	if req.SubResource != "" {
		kind += "/" + req.SubResource
	}
	// The object's own name and uid: a CREATE with generateName has no
	// name in the request, and without the uid every such object would be
	// the same related object, whose Events the recorder folds into one.
	var meta metav1.PartialObjectMetadata
	if len(req.Object.Raw) > 0 {
		_ = json.Unmarshal(req.Object.Raw, &meta)
	}
	name := req.Name
	if name == "" {
		name = meta.Name
	}
	object := name
	if req.Namespace != "" {
		object = req.Namespace + "/" + name
	}
	log.FromContext(ctx).WithName("quotakeeper").Info("quota bypassed", "bypass", b.Name, "reason", b.Spec.Reason,
		"user", req.UserInfo.Username, "operation", req.Operation, "kind", kind, "namespace", req.Namespace, "name", name,
		"constraint", constraint, "message", msg)
	if a.Recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: quotav1alpha1.GroupVersion.String(), Kind: "QuotaBypass", Name: b.Name, UID: b.UID}
	related := &corev1.ObjectReference{APIVersion: req.Kind.Group + "/" + req.Kind.Version, Kind: req.Kind.Kind,
		Namespace: req.Namespace, Name: name, UID: meta.UID}
	if req.Kind.Group == "" {
		related.APIVersion = req.Kind.Version
	}
	note := fmt.Sprintf("%s: %s %s %s admitted over quota (constraint %s: %s); bypass reason: %s",
		req.UserInfo.Username, req.Operation, kind, object, constraint, msg, b.Spec.Reason)
	a.Recorder.Eventf(ref, related, corev1.EventTypeWarning, "QuotaBypassed", "Admit", "%s", eventnote.Fit(note))
}
