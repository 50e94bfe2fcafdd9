package controllers_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// The test kinds (test/crds): Organization is cluster-scoped, Project
// namespaced.
var (
	orgGVK     = schema.GroupVersionKind{Group: "resourcemanager.miloapis.com", Version: "v1alpha1", Kind: "Organization"}
	projectGVK = schema.GroupVersionKind{Group: "resourcemanager.miloapis.com", Version: "v1alpha1", Kind: "Project"}
)

// newTrigger creates an object of a test kind with the given spec and
// status, and deletes it when the test ends.
func newTrigger(t *testing.T, gvk schema.GroupVersionKind, ns, name string, spec, status map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	if status != nil {
		u.Object["status"] = status
	}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	if err := k8s.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, u) })
	return u
}

// setField updates one field of a trigger (spec.tier, status.phase).
func setField(t *testing.T, u *unstructured.Unstructured, value any, path ...string) {
	t.Helper()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Update(ctx, u); err != nil {
		t.Fatal(err)
	}
}

// grantPolicy is a GrantCreationPolicy on kind giving consumer the amount
// of rt, with the given conditions.
func grantPolicy(name string, trigger schema.GroupVersionKind, consumer quotav1alpha1.ConsumerRefTemplate, rt string, amount intstr.IntOrString,
	conditions ...string) *quotav1alpha1.GrantCreationPolicy {
	p := builders.GrantPolicy(name, trigger.GroupVersion().String(), trigger.Kind, consumer).Allowance(rt, amount)
	for _, c := range conditions {
		p.Condition(c)
	}
	return p.Obj()
}

// newReadyPolicy creates the policy, deletes it when the test ends, and
// waits for it to be Ready.
func newReadyPolicy(t *testing.T, p *quotav1alpha1.GrantCreationPolicy) {
	t.Helper()
	createPolicy(t, p)
	wantReady(t, p, metav1.ConditionTrue, quotav1alpha1.ReasonPolicyReady, readyMessage)
}

// waitGrant waits for the grant to exist and be Active, and returns it.
func waitGrant(t *testing.T, ns, name string) *quotav1alpha1.ResourceGrant {
	t.Helper()
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	testenv.Eventually(t, settle, "grant "+ns+"/"+name, func() error {
		return k8s.Get(ctx, client.ObjectKeyFromObject(g), g)
	})
	waitCondition(t, g, quotav1alpha1.ConditionActive, metav1.ConditionTrue, quotav1alpha1.ReasonGrantActive)
	return g
}

// waitNoGrant waits for the grant to be gone.
func waitNoGrant(t *testing.T, ns, name string) {
	t.Helper()
	testenv.Eventually(t, settle, "grant "+ns+"/"+name+" gone", func() error {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &quotav1alpha1.ResourceGrant{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("grant %s/%s still exists", ns, name)
	})
}

// policyGrants lists the grants labelled as the policy's, by namespace/name.
func policyGrants(t *testing.T, policy string) []string {
	t.Helper()
	var list quotav1alpha1.ResourceGrantList
	if err := k8s.List(ctx, &list, client.MatchingLabels{quotav1alpha1.LabelPolicy: policy}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range list.Items {
		if g.DeletionTimestamp == nil {
			out = append(out, g.Namespace+"/"+g.Name)
		}
	}
	slices.Sort(out)
	return out
}

// consistently fails the test if check fails at any time during d: the
// way to show that something does not happen.
func consistently(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// wantPolicyEvent waits for an event about the object (kind and name, and uid
// when given) with reason and exactly note, of the given type.
func wantPolicyEvent(t *testing.T, kind, ns, name, uid, eventtype, reason, note string) {
	t.Helper()
	if ns == "" {
		ns = metav1.NamespaceDefault // where events about cluster-scoped objects go
	}
	testenv.Eventually(t, settle, fmt.Sprintf("event %s on %s %s", reason, kind, name), func() error {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			r := e.Regarding
			if r.Kind != kind || r.Name != name || (uid != "" && string(r.UID) != uid) || e.Reason != reason {
				continue
			}
			if e.Note == note && e.Type == eventtype && e.ReportingController == "quotakeeper-grant-policy" {
				return nil
			}
			seen = append(seen, e.Type+" "+e.Note)
		}
		return fmt.Errorf("no %s event %q; seen with that reason:\n  %s", eventtype, note, strings.Join(seen, "\n  "))
	})
}
