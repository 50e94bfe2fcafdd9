package controllers_test

import (
	"math"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

// Done when (issue 12): a grant whose amounts would push its consumer's
// total past int64 is never made active, even when the webhook did not see
// it coming (two grants at once, or no webhook): it is Active=False with
// reason LimitOverflow and the webhook's message, the grants that count
// stay active and the limit stays theirs; once room is made it is judged
// again and becomes active.
func TestGrantThatWouldOverflowItsConsumerIsNotActive(t *testing.T) {
	needEnv(t)
	const rt = "ovf.example.com/projects"
	acme := orgConsumer("acme-ovf")
	newRegistration(t, "ovf-projects", rt, organizationType)
	big := newGrant(t, "ovf-big", acme, builders.Allowance(rt, math.MaxInt64))
	key := bucketKey(acme, rt, nil)
	wantBucket(t, key, usage{math.MaxInt64, 0, 0, math.MaxInt64})

	more := grantObject("ovf-more", acme, builders.Allowance(rt, 1))
	// The webhook refuses this very grant; without it, the controller must.
	probe := grantObject("ovf-probe", acme, builders.Allowance(rt, 1))
	withoutValidation(t, "vresourcegrant.quota.miloapis.com", probe, func() {
		if err := k8s.Create(ctx, more); err != nil {
			t.Fatal(err)
		}
		msg := waitCondition(t, more, quotav1alpha1.ConditionActive, metav1.ConditionFalse, quotav1alpha1.ReasonLimitOverflow)
		want := `spec.allowances[0]: Invalid value: "ovf.example.com/projects": with the other grants for resourcemanager.miloapis.com/Organization "acme-ovf" (such as "ovf-big"), the amounts of ovf.example.com/projects sum past the int64 maximum 9223372036854775807`
		if msg != want {
			t.Fatalf("Active message:\n got %s\nwant %s", msg, want)
		}
		wantEvent(t, more, "Warning", quotav1alpha1.ReasonLimitOverflow, "Judge", want)
	})
	waitCondition(t, big, quotav1alpha1.ConditionActive, metav1.ConditionTrue, quotav1alpha1.ReasonGrantActive)
	b := wantBucket(t, key, usage{math.MaxInt64, 0, 0, math.MaxInt64})
	if len(b.Status.ContributingGrantRefs) != 1 || b.Status.ContributingGrantRefs[0].Name != "ovf-big" {
		t.Fatalf("contributing grants %+v, want ovf-big alone", b.Status.ContributingGrantRefs)
	}

	// Deleting the big grant makes room: the refused one is judged again.
	if err := k8s.Delete(ctx, big); err != nil {
		t.Fatal(err)
	}
	if msg := waitCondition(t, more, quotav1alpha1.ConditionActive, metav1.ConditionTrue, quotav1alpha1.ReasonGrantActive); msg != "grants ovf.example.com/projects 1" {
		t.Fatalf("Active message %q", msg)
	}
	wantEvent(t, more, "Normal", quotav1alpha1.ReasonGrantActive, "Judge", "grants ovf.example.com/projects 1")
	wantBucket(t, key, usage{1, 0, 0, 1})
}
