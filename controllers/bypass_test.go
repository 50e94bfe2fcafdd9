package controllers_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/bypass"
	"github.com/quotakeeper/quotakeeper/localcluster"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// newQuotaEntity creates a QuotaEntity constraint with the given
// enforcement action.
func newQuotaEntity(t *testing.T, name, action string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"enforcementAction": action,
			"parameters":        map[string]any{"resourceType": rtConfigMaps},
		},
	}}
	u.SetGroupVersionKind(bypass.ConstraintGroupVersion.WithKind("QuotaEntity"))
	u.SetName(name)
	if err := k8s.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, u) })
	return u
}

// constraintState is what a bypass changes on a constraint.
func constraintState(t *testing.T, name string) string {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(bypass.ConstraintGroupVersion.WithKind("QuotaEntity"))
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
		t.Fatal(err)
	}
	action, _, _ := unstructured.NestedString(u.Object, "spec", "enforcementAction")
	a := u.GetAnnotations()
	return fmt.Sprintf("action=%s bypass=%q original=%q", action, a[quotav1alpha1.AnnotationBypass], a[quotav1alpha1.AnnotationEnforcementAction])
}

func waitConstraint(t *testing.T, name, want string) {
	t.Helper()
	testenv.Eventually(t, settle, "constraint "+name, func() error {
		if got := constraintState(t, name); got != want {
			return fmt.Errorf("%s: %s, want %s", name, got, want)
		}
		return nil
	})
}

func bypassObject(name, reason string, d time.Duration, cs ...quotav1alpha1.BypassedConstraint) *quotav1alpha1.QuotaBypass {
	return &quotav1alpha1.QuotaBypass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: quotav1alpha1.QuotaBypassSpec{Reason: reason, Duration: metav1.Duration{Duration: d}, Constraints: cs}}
}

const (
	relaxed  = `action=warn bypass=%q original="deny"`
	restored = `action=deny bypass="" original=""`
	warnOnly = `action=warn bypass="" original=""`
)

// Done when: an active bypass holds exactly the deny constraints it names
// at warn, annotated with itself and the action before, reports them and
// its expiry; at expiry they deny again and it reports Expired; a deletion
// restores too, and only then goes.
func TestBypassRelaxesItsConstraintsUntilItEnds(t *testing.T) {
	needEnv(t)
	newQuotaEntity(t, "t60-deny", "deny")
	newQuotaEntity(t, "t60-warn", "warn")
	newQuotaEntity(t, "t60-other", "deny")

	b := bypassObject("t60-outage", "INC-1: Gatekeeper cannot reach the API server", 6*time.Second,
		quotav1alpha1.BypassedConstraint{Kind: "QuotaEntity", Name: "t60-deny"},
		quotav1alpha1.BypassedConstraint{Kind: "QuotaEntity", Name: "t60-warn"},
		quotav1alpha1.BypassedConstraint{Kind: "QuotaEntity", Name: "t60-missing"})
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, b) })
	msg := waitCondition(t, b, quotav1alpha1.ConditionActive, metav1.ConditionTrue, quotav1alpha1.ReasonBypassActive)
	expires := b.CreationTimestamp.Add(6 * time.Second)
	if want := "quota denials of 1 constraint(s) are warnings until " + expires.UTC().Format(time.RFC3339) +
		": INC-1: Gatekeeper cannot reach the API server"; msg != want {
		t.Fatalf("Active message %q, want %q", msg, want)
	}
	if !b.Status.ExpiresAt.Time.Equal(expires) {
		t.Fatalf("expiresAt %v, want %v", b.Status.ExpiresAt, expires)
	}
	if want := []quotav1alpha1.RelaxedConstraint{{Kind: "QuotaEntity", Name: "t60-deny", EnforcementAction: "deny"}}; fmt.Sprint(b.Status.Relaxed) != fmt.Sprint(want) {
		t.Fatalf("relaxed %v, want %v", b.Status.Relaxed, want)
	}
	if fs := b.GetFinalizers(); len(fs) != 1 || fs[0] != quotav1alpha1.BypassFinalizer {
		t.Fatalf("finalizers %v", fs)
	}
	if got, want := constraintState(t, "t60-deny"), fmt.Sprintf(relaxed, "t60-outage"); got != want {
		t.Fatalf("t60-deny: %s, want %s", got, want)
	}
	if got := constraintState(t, "t60-warn"); got != warnOnly {
		t.Fatalf("t60-warn (warns already): %s, want %s", got, warnOnly)
	}
	if got := constraintState(t, "t60-other"); got != restored {
		t.Fatalf("t60-other (not named): %s, want %s", got, restored)
	}

	// It ends by itself.
	msg = waitCondition(t, b, quotav1alpha1.ConditionActive, metav1.ConditionFalse, quotav1alpha1.ReasonBypassExpired)
	if want := "ended at " + expires.UTC().Format(time.RFC3339) + "; the constraints deny again"; msg != want {
		t.Fatalf("Expired message %q, want %q", msg, want)
	}
	if time.Now().Before(expires) {
		t.Fatalf("expired before %v", expires)
	}
	if got := constraintState(t, "t60-deny"); got != restored {
		t.Fatalf("t60-deny after expiry: %s, want %s", got, restored)
	}
	if got := constraintState(t, "t60-warn"); got != warnOnly {
		t.Fatalf("t60-warn after expiry: %s, want %s", got, warnOnly)
	}
	if len(b.Status.Relaxed) != 0 {
		t.Fatalf("expired bypass still holds %v", b.Status.Relaxed)
	}
	// The finalizer goes after the status is written.
	testenv.Eventually(t, settle, "expired bypass's finalizer removed", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		if fs := b.GetFinalizers(); len(fs) != 0 {
			return fmt.Errorf("finalizers %v", fs)
		}
		return nil
	})

	// Deleting an active bypass restores before it goes; "*" names every
	// constraint of the kind.
	all := bypassObject("t60-all", "INC-2", time.Hour, quotav1alpha1.BypassedConstraint{Kind: "QuotaEntity", Name: "*"})
	if err := k8s.Create(ctx, all); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, all, quotav1alpha1.ConditionActive, metav1.ConditionTrue, quotav1alpha1.ReasonBypassActive)
	waitConstraint(t, "t60-deny", fmt.Sprintf(relaxed, "t60-all"))
	waitConstraint(t, "t60-other", fmt.Sprintf(relaxed, "t60-all"))
	// Nobody, not even a member of the bypass groups, may strip the
	// finalizer while the bypass holds constraints relaxed: nothing would
	// restore them.
	testenv.Eventually(t, settle, "strip the finalizer", func() error {
		var cur quotav1alpha1.QuotaBypass
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(all), &cur); err != nil {
			return err
		}
		cur.Finalizers = nil
		err := k8s.Update(ctx, &cur)
		if apierrors.IsConflict(err) {
			return err
		}
		want := `admission webhook "vquotabypass.quota.miloapis.com" denied the request: quotabypasses.quota.miloapis.com "t60-all" is forbidden: ` +
			`finalizer quota.miloapis.com/bypass-restore: it still holds QuotaEntity/t60-deny, QuotaEntity/t60-other at warn; ` +
			`the manager removes it once it has restored them`
		if !apierrors.IsForbidden(err) || err.Error() != want {
			t.Fatalf("strip the finalizer: got %v\nwant %s", err, want)
		}
		return nil
	})
	if err := k8s.Delete(ctx, all); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, settle, "deleted bypass gone", func() error {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(all), all)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there, finalizers %v", all.GetFinalizers())
	})
	for _, name := range []string{"t60-deny", "t60-other"} {
		if got := constraintState(t, name); got != restored {
			t.Fatalf("%s after deletion: %s, want %s", name, got, restored)
		}
	}
	if got := constraintState(t, "t60-warn"); got != warnOnly {
		t.Fatalf("t60-warn after deletion: %s, want %s", got, warnOnly)
	}
}

// Done when: only members of the bypass groups may create or delete a
// QuotaBypass, even with RBAC that lets others write the kind; a bad spec
// is refused field by field; the spec cannot change; each accepted request
// is a BypassRequested Event naming the user and the reason.
func TestOnlyBypassGroupsBreakTheGlass(t *testing.T) {
	needEnv(t)
	// The shipped break-glass role, bound to a group in the bypass groups
	// and to one that is not.
	objs, err := localcluster.ReadObjects(filepath.Join(testenv.RepoRoot(), "config", "rbac", "personas.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetName() == "quotakeeper-break-glass" {
			if err := k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "t61-break-glass"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quotakeeper-break-glass"},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "incident-commanders"},
			{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "sre"},
		}}
	if err := k8s.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, binding) })
	ivan := clientAs(t, "ivan", "incident-commanders")
	mallory := clientAs(t, "mallory", "sre")
	c := quotav1alpha1.BypassedConstraint{Kind: "QuotaEntity", Name: "t61-none"}

	refused := func(err error, verb string) {
		t.Helper()
		want := `admission webhook "vquotabypass.quota.miloapis.com" denied the request: quotabypasses.quota.miloapis.com "t61-bypass" is forbidden: ` +
			`a QuotaBypass turns quota denials into warnings; to ` + verb + ` one only members of system:masters, incident-commanders may, and "mallory" is not`
		if !apierrors.IsForbidden(err) || err.Error() != want {
			t.Fatalf("%s as mallory: got %v\nwant %s", verb, err, want)
		}
	}
	b := bypassObject("t61-bypass", "INC-3: ledger writes time out", 10*time.Minute, c)
	refused(mallory.Create(ctx, b.DeepCopy()), "create")
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), &quotav1alpha1.QuotaBypass{}); !apierrors.IsNotFound(err) {
		t.Fatalf("refused bypass stored: %v", err)
	}

	// Bad specs, with the field.
	bad := b.DeepCopy()
	bad.Spec.Duration.Duration = 0
	requireInvalid(t, ivan.Create(ctx, bad), "spec.duration", `Invalid value: "0s": must be more than 0`)
	bad.Spec.Duration.Duration = 61 * time.Minute
	requireInvalid(t, ivan.Create(ctx, bad), "spec.duration",
		`Invalid value: "1h1m0s": must be at most 1h0m0s (the manager's --max-bypass-duration)`)
	bad = b.DeepCopy()
	bad.Spec.Reason = "   "
	requireInvalid(t, ivan.Create(ctx, bad), "spec.reason", "Required value: say why quota is bypassed (an incident, a ticket)")
	// Only quota constraints (issue 22): not a kind no template makes, nor
	// one whose template does not build on lib.quota.
	labels := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "templates.gatekeeper.sh/v1", "kind": "ConstraintTemplate",
		"metadata": map[string]any{"name": "t61requiredlabels"},
		"spec": map[string]any{
			"crd":     map[string]any{"spec": map[string]any{"names": map[string]any{"kind": "T61RequiredLabels"}}},
			"targets": []any{map[string]any{"target": "admission.k8s.gatekeeper.sh", "rego": "package t61\nviolation[{\"msg\": \"no\"}] { false }"}},
		},
	}}
	if err := k8s.Create(ctx, labels); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, labels) })
	bad = b.DeepCopy()
	bad.Spec.Constraints = []quotav1alpha1.BypassedConstraint{{Kind: "T61RequiredLabels", Name: "*"}, {Kind: "T61Nothing", Name: "x"}}
	requireInvalid(t, ivan.Create(ctx, bad), "spec.constraints[0].kind",
		`Invalid value: "T61RequiredLabels": not a quota constraint: a QuotaBypass relaxes only constraints whose template builds on quotakeeper's Rego library (lib.quota)`)
	requireInvalid(t, ivan.Create(ctx, bad), "spec.constraints[1].kind", `Invalid value: "T61Nothing": no ConstraintTemplate "t61nothing" makes this kind`)

	if err := ivan.Create(ctx, b); err != nil {
		t.Fatalf("create as ivan: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, b) })
	wantRequested(t, b.Name, "Create", "Create by ivan for 10m0s: INC-3: ledger writes time out")

	// The spec never changes, not even for the groups.
	testenv.Eventually(t, settle, "update the reason", func() error {
		var cur quotav1alpha1.QuotaBypass
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), &cur); err != nil {
			return err
		}
		cur.Spec.Reason = "something else"
		err := k8s.Update(ctx, &cur)
		if apierrors.IsConflict(err) {
			return err
		}
		requireInvalid(t, err, "spec", "Forbidden: is immutable: delete the QuotaBypass and create another")
		return nil
	})

	refused(mallory.Delete(ctx, b.DeepCopy()), "delete")
	if err := ivan.Delete(ctx, b); err != nil {
		t.Fatalf("delete as ivan: %v", err)
	}
	wantRequested(t, b.Name, "Delete", "Delete by ivan for 10m0s: INC-3: ledger writes time out")
}

// wantRequested waits for the BypassRequested Event about the bypass name
// (named, not by uid: on create it has none yet) with the note.
func wantRequested(t *testing.T, name, action, note string) {
	t.Helper()
	testenv.Eventually(t, settle, "BypassRequested event", func() error {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind != "QuotaBypass" || e.Regarding.Name != name || e.Reason != "BypassRequested" {
				continue
			}
			if e.Type == "Warning" && e.Action == action && e.Note == note {
				return nil
			}
			seen = append(seen, e.Type+"/"+e.Action+": "+e.Note)
		}
		return fmt.Errorf("no BypassRequested %q; seen %q", note, seen)
	})
}
