package webhooks_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotakeeper/quotakeeper/internal/localcluster"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

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
	b := builders.Bypass("t61-bypass", "INC-3: ledger writes time out", 10*time.Minute).Constraints(c).Obj()
	refused(mallory.Create(ctx, b.DeepCopy()), "create")
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), &quotav1alpha1.QuotaBypass{}); !apierrors.IsNotFound(err) {
		t.Fatalf("refused bypass stored: %v", err)
	}

	// Bad specs, with the field.
	bad := b.DeepCopy()
	bad.Spec.Duration.Duration = 0
	testenv.RequireInvalid(t, ivan.Create(ctx, bad), "spec.duration", `Invalid value: "0s": must be more than 0`)
	bad.Spec.Duration.Duration = 61 * time.Minute
	testenv.RequireInvalid(t, ivan.Create(ctx, bad), "spec.duration",
		`Invalid value: "1h1m0s": must be at most 1h0m0s (the manager's --max-bypass-duration)`)
	bad = b.DeepCopy()
	bad.Spec.Reason = "   "
	testenv.RequireInvalid(t, ivan.Create(ctx, bad), "spec.reason", "Required value: say why quota is bypassed (an incident, a ticket)")
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
	testenv.RequireInvalid(t, ivan.Create(ctx, bad), "spec.constraints[0].kind",
		`Invalid value: "T61RequiredLabels": not a quota constraint: a QuotaBypass relaxes only constraints whose template builds on quotakeeper's Rego library (lib.quota)`)
	testenv.RequireInvalid(t, ivan.Create(ctx, bad), "spec.constraints[1].kind", `Invalid value: "T61Nothing": no ConstraintTemplate "t61nothing" makes this kind`)

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
		testenv.RequireInvalid(t, err, "spec", "Forbidden: is immutable: delete the QuotaBypass and create another")
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
