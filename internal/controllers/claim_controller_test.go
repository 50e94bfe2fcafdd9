package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/controllers"
	"github.com/quotakeeper/quotakeeper/internal/grants"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// Done when: grants users 15 / clusters 3 / projects 5: a claim {2, 5, 1}
// is Granted, held as reservations under its uid; {1, 20, 1} is Denied with
// QuotaExceeded and changes no bucket. Deleting a granted claim returns its
// amount at once, and a decided claim is never decided again.
func TestClaimsAreAllOrNothing(t *testing.T) {
	needEnv(t)
	const clusters, users, projects = "t4.example.com/clusters", "t4.example.com/users", "t4.example.com/projects"
	acme := orgConsumer("acme-t4")
	for name, rt := range map[string]string{"t4-clusters": clusters, "t4-users": users, "t4-projects": projects} {
		newRegistration(t, name, rt, organizationType)
	}
	newNamespace(t, "t4-tenant", tenantOf("acme-t4"))
	newGrant(t, "t4", acme, builders.Allowance(users, 15), builders.Allowance(clusters, 3), builders.Allowance(projects, 5))

	first := waitDecided(t, newClaim(t, "t4-tenant", "fits", acme, builders.Request(clusters, 2, nil), builders.Request(users, 5, nil), builders.Request(projects, 1, nil)))
	if c := grantedCondition(first); c.Status != metav1.ConditionTrue || c.Reason != quotav1alpha1.ReasonQuotaAvailable {
		t.Fatalf("first claim: %+v", c)
	}
	wantEvent(t, first, "Normal", quotav1alpha1.ReasonQuotaAvailable, "Decide", grantedCondition(first).Message)
	after := map[string]usage{clusters: {3, 0, 2, 1}, users: {15, 0, 5, 10}, projects: {5, 0, 1, 4}}
	for rt, u := range after {
		wantBucket(t, bucketKey(acme, rt, nil), u)
	}

	second := waitDecided(t, newClaim(t, "t4-tenant", "too-many-users", acme, builders.Request(clusters, 1, nil), builders.Request(users, 20, nil), builders.Request(projects, 1, nil)))
	c := grantedCondition(second)
	if c.Status != metav1.ConditionFalse || c.Reason != quotav1alpha1.ReasonQuotaExceeded ||
		c.Message != "quota exceeded: requested 20 of t4.example.com/users, available 10 of 15 (allocated 0, reserved 5)" {
		t.Fatalf("second claim: %+v", c)
	}
	wantEvent(t, second, "Warning", quotav1alpha1.ReasonQuotaExceeded, "Decide",
		"quota exceeded: requested 20 of t4.example.com/users, available 10 of 15 (allocated 0, reserved 5)")
	for _, a := range second.Status.Allocations {
		if a.Status != quotav1alpha1.AllocationDenied || a.AllocatedAmount != 0 {
			t.Fatalf("a request of a denied claim was not denied: %+v", a)
		}
	}
	if a := second.Status.Allocations[1]; a.ResourceType != users || a.Reason != quotav1alpha1.ReasonQuotaExceeded ||
		a.Message != "requested 20 of t4.example.com/users, available 10 of 15 (allocated 0, reserved 5)" {
		t.Fatalf("users request: %+v", a)
	}
	for rt, u := range after {
		b := wantBucket(t, bucketKey(acme, rt, nil), u)
		if len(b.Status.Reservations) != 1 || b.Status.Reservations[0].ID != string(first.UID) {
			t.Fatalf("bucket %s holds %+v, want only the first claim", rt, b.Status.Reservations)
		}
	}

	// Deleting the granted claim returns everything it held, and the
	// finalizer lets it go.
	if err := k8s.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	for rt, u := range map[string]usage{clusters: {3, 0, 0, 3}, users: {15, 0, 0, 15}, projects: {5, 0, 0, 5}} {
		wantBucket(t, bucketKey(acme, rt, nil), u)
	}
	testenv.Eventually(t, settle, "deleted claim gone", func() error {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(first), first)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("deleted claim still there (%w), finalizers %v", err, first.Finalizers)
	})

	// The denied claim would fit now, but its decision stands.
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(second), second); err != nil {
		t.Fatal(err)
	}
	if got := grantedCondition(second); got.Status != metav1.ConditionFalse || got.Message != c.Message {
		t.Fatalf("denied claim decided again: %+v", got)
	}
	// Deleting a denied claim returns nothing (it held nothing).
	if err := k8s.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	wantBucket(t, bucketKey(acme, users, nil), usage{15, 0, 0, 15})
	requireAgreement(t, acme)
}

// A claim the webhook did not judge (a cluster without it, or a
// registration that went away between admission and decision) is judged by
// the controller: Denied with ValidationFailed, holding nothing.
func TestClaimValidatedWhenDecided(t *testing.T) {
	needEnv(t)
	const rt = "t5.example.com/projects"
	acme := orgConsumer("acme-t5")
	newRegistration(t, "t5-projects", rt, organizationType)
	newNamespace(t, "t5-tenant", tenantOf("acme-t5"))
	newNamespace(t, "t5-outsider", nil)
	newGrant(t, "t5", acme, builders.Allowance(rt, 5))

	claim := claimObject("t5-outsider", "unchecked", acme, builders.Request(rt, 1, nil), builders.Request("t5.example.com/unknown", 1, nil))
	withoutClaimValidation(t, func() {
		testenv.Eventually(t, settle, "unchecked claim created", func() error { return k8s.Create(ctx, claim) })
	})
	claim = waitDecided(t, claim)
	c := grantedCondition(claim)
	want := `[spec.consumerRef: Forbidden: namespace "t5-outsider" does not belong to resourcemanager.miloapis.com/Organization "acme-t5": it needs the label resourcemanager.miloapis.com/organization=acme-t5, ` +
		`spec.requests[1].resourceType: Invalid value: "t5.example.com/unknown": no ResourceRegistration declares this resource type]`
	if c.Status != metav1.ConditionFalse || c.Reason != quotav1alpha1.ReasonValidationFailed || c.Message != want {
		t.Fatalf("claim: %+v\nwant message %s", c, want)
	}
	for _, a := range claim.Status.Allocations {
		if a.Status != quotav1alpha1.AllocationDenied || a.Reason != quotav1alpha1.ReasonValidationFailed || a.Message != want {
			t.Fatalf("request: %+v", a)
		}
	}
	wantBucket(t, bucketKey(acme, rt, nil), usage{5, 0, 0, 5})
}

// The claim controller decides and releases nothing before its grant mirror
// holds every grant: a reconcile waits for the sync (here, until its
// deadline) without reading the claim. The wait is explicit in Reconcile; it
// was a watch of the mirror that enqueued nothing, kept only for the
// controller's start to wait on.
func TestClaimReconcileWaitsForTheGrantMirror(t *testing.T) {
	var calls []string
	c := interceptor.NewClient(nil, interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
			calls = append(calls, "get "+key.String())
			return errors.New("no client in this test")
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := controllers.ReconcileClaim(ctx, c, grants.NewMirror(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "claim"}})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for the grant mirror to sync") {
		t.Fatalf("reconcile before the mirror synced: %v, want it to wait for the sync until its deadline", err)
	}
	if len(calls) != 0 {
		t.Fatalf("reconcile before the mirror synced read %v", calls)
	}
}

// A view (a claim the observer writes to show what an object counts) holds
// nothing: it gets no finalizer, the claim controller never decides it, and it
// goes at once when deleted. (That no claim becomes a view or stops being
// one is the claim webhook's, tested in webhooks/claim_test.go.)
func TestViewClaimsAreNeitherDecidedNorHeld(t *testing.T) {
	needEnv(t)
	const cpu = "t31.example.com/cpu"
	acme := orgConsumer("acme-t31")
	newRegistration(t, "t31-cpu", cpu, organizationType)
	newNamespace(t, "t31-tenant", tenantOf("acme-t31"))

	view := builders.Claim("view", "t31-tenant").Consumer(ledgerconv.ConsumerRef(acme)).Request(cpu, 1, nil).View().Obj()
	if err := k8s.Create(ctx, view); err != nil {
		t.Fatal(err)
	}
	if len(view.Finalizers) != 0 {
		t.Fatalf("a view got finalizers %v", view.Finalizers)
	}
	// A claim made after the view is decided: the controller has had its
	// chance at the view.
	real := waitDecided(t, newClaim(t, "t31-tenant", "real", acme, builders.Request(cpu, 1, nil)))
	if c := grantedCondition(real); c.Status != metav1.ConditionFalse || c.Reason != quotav1alpha1.ReasonQuotaExceeded {
		t.Fatalf("the claim after the view: %+v", c)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(view), view); err != nil {
		t.Fatal(err)
	}
	if len(view.Status.Conditions) != 0 || len(view.Status.Allocations) != 0 || len(view.Finalizers) != 0 {
		t.Fatalf("the claim controller touched a view: finalizers %v status %+v", view.Finalizers, view.Status)
	}

	if err := k8s.Delete(ctx, view); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(view), view); !apierrors.IsNotFound(err) {
		t.Fatalf("a deleted view is still there (%v): finalizers %v", err, view.Finalizers)
	}
}
