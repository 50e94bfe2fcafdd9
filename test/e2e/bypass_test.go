package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// bypassGroup is in the manager's --bypass-groups here (main_test.go).
const bypassGroup = "incident-commanders"

// warnings collects the warnings the API server returns to a client.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

// impersonating is a client acting as user in groups, subject to RBAC,
// whose warnings land in w (if not nil).
func impersonating(t *testing.T, user string, w *warnings, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	if w != nil {
		cfg.WarningHandler = w
	}
	c, err := client.New(cfg, client.Options{Scheme: cluster.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitConstraintAction waits until the constraint has the action and every
// Gatekeeper replica enforces its current generation.
func waitConstraintAction(t *testing.T, name, action string) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("constraint %s at %s on every replica", name, action), func() error {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(constraintGVK("QuotaEntity"))
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: name}, got); err != nil {
			return err
		}
		if a, _, _ := unstructured.NestedString(got.Object, "spec", "enforcementAction"); a != action {
			return fmt.Errorf("enforcementAction %q", a)
		}
		byPod, _, _ := unstructured.NestedSlice(got.Object, "status", "byPod")
		current := 0
		for _, p := range byPod {
			pm := p.(map[string]any)
			g, _, _ := unstructured.NestedInt64(pm, "observedGeneration")
			e, _, _ := unstructured.NestedBool(pm, "enforced")
			if e && g == got.GetGeneration() {
				current++
			}
		}
		if current < len(cluster.Gatekeepers) {
			return fmt.Errorf("%d of %d replicas enforce generation %d", current, len(cluster.Gatekeepers), got.GetGeneration())
		}
		return nil
	})
}

func constraintGVK(kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "constraints.gatekeeper.sh", Version: "v1beta1", Kind: kind}
}

// Done when (seed 000's break-glass): at the limit a create is denied; an
// administrator in the bypass group (impersonated, under the shipped
// quotakeeper-break-glass role) creates a QuotaBypass, and the next create
// is admitted with Gatekeeper's warning carrying the exact quota message;
// the bucket counts it (allocated = limit + 1); a QuotaBypassed Event names
// the user and the reason; once the bypass's duration has passed creates
// are denied again, and the constraint denies again by itself. A user with
// the same role outside the group is refused.
//
// On a stock Gatekeeper the same holds but for what the plugin's handler
// wrapper does (docs/operations.md, "What the stock mode gives up"): no
// QuotaBypassed Event, and past the expiry creates are denied again once
// the manager has put the constraint back at deny, not at once.
func TestBreakGlassBypassesQuotaForAWhile(t *testing.T) {
	const ns, rt, name = "e2e-bypass", "e2e.quota/bypass-configmaps", "e2e-bypass"
	const duration = 30 * time.Second
	ctx := context.Background()
	namespace(t, ns, nil)
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	grant(t, "configmaps", consumer, rt, 1)
	quotaEntity(t, name, []string{ns}, map[string]any{"resourceType": rt})

	// A tenant who may create ConfigMaps in the namespace.
	tenantRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "configmap-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get"}}}}
	tenantBinding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tara"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: tenantRole.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tara"}}}
	// The shipped break-glass role (the test bed installs config/rbac),
	// bound to the bypass group and to one that is not in it.
	if err := cluster.Client.Get(ctx, client.ObjectKey{Name: "quotakeeper-break-glass"}, &rbacv1.ClusterRole{}); err != nil {
		t.Fatalf("the shipped quotakeeper-break-glass ClusterRole: %v", err)
	}
	breakGlass := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-break-glass"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quotakeeper-break-glass"},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: bypassGroup},
			{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "sre"},
		}}
	for _, o := range []client.Object{tenantRole, tenantBinding, breakGlass} {
		create(t, o)
	}
	tw := &warnings{}
	tara := impersonating(t, "tara", tw)
	ivan := impersonating(t, "ivan", nil, bypassGroup)
	mallory := impersonating(t, "mallory", nil, "sre")
	createAsTara := func(cm string) error { return tara.Create(ctx, configMap(ns, cm, nil)) }

	if err := createAsTara("cm-1"); err != nil {
		t.Fatalf("cm-1: %v", err)
	}
	waitBucket(t, consumer, rt, 1, 0)
	see := seeEffective(ns, consumer, rt)
	quotaMsg := fmt.Sprintf("quota exceeded for Namespace %s: requested 1 of %s, available 0 of 1 (allocated 1, reserved 0)%s", ns, rt, see)
	err := createAsTara("cm-2")
	if want := fmt.Sprintf(`admission webhook "validation.gatekeeper.sh" denied the request: [%s] %s`, name, quotaMsg); err == nil || err.Error() != want {
		t.Fatalf("cm-2 at the limit: got %v\nwant %s", err, want)
	}

	bypass := builders.Bypass("e2e-incident", "INC-42: quota ledger unreachable", duration).Constraint("QuotaEntity", name).Obj()
	// Outside the group, the same role is not enough.
	err = mallory.Create(ctx, bypass.DeepCopy())
	if want := `admission webhook "vquotabypass.quota.miloapis.com" denied the request: quotabypasses.quota.miloapis.com "e2e-incident" is forbidden: ` +
		`a QuotaBypass turns quota denials into warnings; to create one only members of system:masters, ` + bypassGroup + ` may, and "mallory" is not`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("bypass as mallory: got %v\nwant %s", err, want)
	}
	// And a tenant has no RBAC for the kind at all.
	if err := tara.Create(ctx, bypass.DeepCopy()); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "tara" cannot create resource "quotabypasses"`) {
		t.Fatalf("bypass as tara: got %v, want RBAC's Forbidden", err)
	}

	if err := ivan.Create(ctx, bypass); err != nil {
		t.Fatalf("bypass as ivan: %v", err)
	}
	expires := bypass.CreationTimestamp.Add(duration)
	waitConstraintAction(t, name, "warn")

	tw.take()
	if time.Now().After(expires) {
		t.Fatalf("the machine is too slow: the %s bypass expired before the constraint warned everywhere", duration)
	}
	if err := createAsTara("cm-2"); err != nil {
		t.Fatalf("cm-2 under the bypass: %v", err)
	}
	if got, want := tw.take(), []string{fmt.Sprintf("[%s] %s", name, quotaMsg)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("warnings %q, want %q", got, want)
	}
	// Counted: the bucket is over its limit.
	waitBucket(t, consumer, rt, 2, 0)
	if st := bucket(t, consumer, rt); st.Limit != 1 || st.ClaimCount != 2 {
		t.Fatalf("limit %d claimCount %d, want 1 and 2", st.Limit, st.ClaimCount)
	}
	if stockMode {
		t.Log("stock Gatekeeper: no QuotaBypassed Event (the plugin's handler wrapper writes it); Gatekeeper's logDenies logs the warning instead")
	} else {
		waitBypassedEvent(t, bypass, ns, name, quotaMsg)
	}

	// It ends by itself: past its expiry the next create is denied,
	// whether or not the constraint is back at deny yet (on a stock
	// Gatekeeper, once the manager has put it back).
	time.Sleep(time.Until(expires.Add(time.Second)))
	if stockMode {
		waitConstraintAction(t, name, "deny")
	}
	if err := createAsTara("cm-3"); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("[%s] quota exceeded for Namespace %s: requested 1 of %s", name, ns, rt)) {
		t.Fatalf("cm-3 after the bypass expired: got %v, want the quota denial", err)
	}
	waitConstraintAction(t, name, "deny")
	testenv.Eventually(t, time.Minute, "bypass Expired", func() error {
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(bypass), bypass); err != nil {
			return err
		}
		c := meta.FindStatusCondition(bypass.Status.Conditions, quotav1alpha1.ConditionActive)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != quotav1alpha1.ReasonBypassExpired {
			return fmt.Errorf("Active %+v", c)
		}
		return nil
	})
	err = createAsTara("cm-4")
	if want := fmt.Sprintf(`admission webhook "validation.gatekeeper.sh" denied the request: [%s] quota exceeded for Namespace %s: requested 1 of %s, available 0 of 1 (allocated 2, reserved 0)%s`, name, ns, rt, see); err == nil || err.Error() != want {
		t.Fatalf("cm-4 after the bypass: got %v\nwant %s", err, want)
	}
	waitBucket(t, consumer, rt, 2, 0)
}

// waitBypassedEvent waits for the QuotaBypassed Event of the plugin's
// handler wrapper for tara's cm-2 in ns, admitted under bypass over
// constraint's quotaMsg.
func waitBypassedEvent(t *testing.T, bypass *quotav1alpha1.QuotaBypass, ns, constraint, quotaMsg string) {
	t.Helper()
	ctx := context.Background()
	wantNote := fmt.Sprintf("tara: CREATE ConfigMap %s/cm-2 admitted over quota (constraint %s: %s); bypass reason: INC-42: quota ledger unreachable", ns, constraint, quotaMsg)
	testenv.Eventually(t, time.Minute, "QuotaBypassed event", func() error {
		var list eventsv1.EventList
		if err := cluster.Client.List(ctx, &list); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.UID != bypass.UID || e.Reason != "QuotaBypassed" {
				continue
			}
			if e.Type == "Warning" && e.Action == "Admit" && e.Note == wantNote && e.Related != nil && e.Related.Name == "cm-2" {
				return nil
			}
			seen = append(seen, e.Note)
		}
		return fmt.Errorf("no QuotaBypassed %q; seen %q", wantNote, seen)
	})
}
