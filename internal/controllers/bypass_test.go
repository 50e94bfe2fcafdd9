package controllers_test

import (
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/bypass"
	"github.com/quotakeeper/quotakeeper/test/builders"
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

	b := builders.Bypass("t60-outage", "INC-1: Gatekeeper cannot reach the API server", 6*time.Second).
		Constraint("QuotaEntity", "t60-deny").Constraint("QuotaEntity", "t60-warn").Constraint("QuotaEntity", "t60-missing").Obj()
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
	all := builders.Bypass("t60-all", "INC-2", time.Hour).Constraint("QuotaEntity", "*").Obj()
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
