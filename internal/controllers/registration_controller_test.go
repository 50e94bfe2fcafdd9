package controllers_test

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// Done when: a second ResourceRegistration for a resource type an active
// one declares is rejected at create with "already registered".
func TestWebhookRefusesASecondRegistration(t *testing.T) {
	needEnv(t)
	const rt = "t9.example.com/projects"
	first := newRegistration(t, "t9-first", rt, organizationType)
	second := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "t9-second"}, Spec: first.Spec}
	testenv.RequireInvalid(t, k8s.Create(ctx, second), "spec.resourceType", `Invalid value: "t9.example.com/projects": already registered by t9-first`)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(second), second); !apierrors.IsNotFound(err) {
		t.Fatalf("refused registration stored: %v", err)
	}
	// Editing the active registration is not a second one.
	patch := client.MergeFrom(first.DeepCopy())
	first.Spec.Description = "projects per organization"
	if err := k8s.Patch(ctx, first, patch); err != nil {
		t.Fatal(err)
	}
}

// A second registration the webhook did not see refused (two created at
// once, or a cluster without the webhook) is refused by the controller, and
// takes over when the first goes away.
func TestSecondRegistrationIsRefused(t *testing.T) {
	needEnv(t)
	const rt = "t10.example.com/projects"
	first := newRegistration(t, "t10-first", rt, organizationType)
	second := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "t10-second"}, Spec: first.Spec}
	probe := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "t10-probe"}, Spec: first.Spec}
	withoutValidation(t, "vresourceregistration.quota.miloapis.com", probe, func() {
		if err := k8s.Create(ctx, second); err != nil {
			t.Fatal(err)
		}
	})
	msg := waitCondition(t, second, quotav1alpha1.ConditionActive, metav1.ConditionFalse, quotav1alpha1.ReasonAlreadyRegistered)
	if msg != "already registered by t10-first" {
		t.Fatalf("message %q", msg)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(first), first); err != nil {
		t.Fatal(err)
	}
	if msg := waitCondition(t, first, quotav1alpha1.ConditionActive, metav1.ConditionTrue, quotav1alpha1.ReasonRegistrationActive); msg != `resource type "t10.example.com/projects" is registered` {
		t.Fatalf("first: %q", msg)
	}
	if err := k8s.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, second, quotav1alpha1.ConditionActive, metav1.ConditionTrue, quotav1alpha1.ReasonRegistrationActive)
}

// The grant controller judges grants again when registrations change: a
// grant whose registration stops declaring a dimension it selects on, or
// goes away, is ValidationFailed and stops counting (the mirror drops it,
// so the limit falls); it counts again once the registration allows it.
func TestGrantFollowsItsRegistration(t *testing.T) {
	needEnv(t)
	const rt = "t11.example.com/cpu"
	acme := orgConsumer("acme-t11")
	reg := newRegistration(t, "t11-cpu", rt, organizationType, "region")
	dfw := bucketKey(acme, rt, map[string]string{"region": "dfw"})
	g := newGrant(t, "t11", acme, builders.SelectedAllowance(rt, &metav1.LabelSelector{MatchLabels: map[string]string{"region": "dfw"}}, 500))
	wantBucket(t, dfw, usage{500, 0, 0, 500})

	setDimensions := func(dims ...string) {
		t.Helper()
		patch := client.MergeFrom(reg.DeepCopy())
		reg.Spec.Dimensions = dims
		if err := k8s.Patch(ctx, reg, patch); err != nil {
			t.Fatal(err)
		}
	}
	setDimensions()
	msg := waitCondition(t, g, quotav1alpha1.ConditionActive, metav1.ConditionFalse, quotav1alpha1.ReasonValidationFailed)
	if want := `spec.allowances[0].buckets[0].dimensionSelector.matchLabels[region]: Invalid value: "region": dimension "region" is not declared by ResourceRegistration "t11-cpu" (it declares none)`; msg != want {
		t.Fatalf("message %q\nwant %q", msg, want)
	}
	wantBucket(t, dfw, usage{0, 0, 0, 0})

	setDimensions("region")
	waitCondition(t, g, quotav1alpha1.ConditionActive, metav1.ConditionTrue, quotav1alpha1.ReasonGrantActive)
	wantBucket(t, dfw, usage{500, 0, 0, 500})

	deleteAndWait(t, reg)
	msg = waitCondition(t, g, quotav1alpha1.ConditionActive, metav1.ConditionFalse, quotav1alpha1.ReasonValidationFailed)
	if want := `spec.allowances[0].resourceType: Invalid value: "t11.example.com/cpu": no ResourceRegistration declares this resource type`; msg != want {
		t.Fatalf("message %q\nwant %q", msg, want)
	}
	wantBucket(t, dfw, usage{0, 0, 0, 0})
}

func deleteAndWait(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, settle, "registration gone", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s still there (%w)", obj.GetName(), err)
		}
		return nil
	})
}
