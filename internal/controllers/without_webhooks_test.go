package controllers_test

import (
	"fmt"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// withoutClaimValidation runs fn while the claim validating webhook is
// removed from the cluster (as in a cluster that never installed it).
func withoutClaimValidation(t *testing.T, fn func()) {
	t.Helper()
	// A tenant's claim on another namespace's quota is refused again.
	probe := claimObject("default", "probe", nsConsumer("kube-system"), builders.Request(rtConfigMaps, 1, nil))
	withoutValidation(t, "vresourceclaim.quota.miloapis.com", probe, fn)
}

// withoutValidation runs fn while the validating webhook hook is removed
// from the cluster, and puts it back, waiting until the apiserver calls it
// again: until creating probe (dry run) is refused as Invalid.
func withoutValidation(t *testing.T, hook string, probe client.Object, fn func()) {
	t.Helper()
	const config = "validating-webhook-configuration"
	vwc := &admissionv1.ValidatingWebhookConfiguration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: config}, vwc); err != nil {
		t.Fatal(err)
	}
	saved := vwc.DeepCopy()
	restore := func() {
		current := &admissionv1.ValidatingWebhookConfiguration{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: config}, current); err != nil {
			t.Fatal(err)
		}
		current.Webhooks = saved.Webhooks
		if err := k8s.Update(ctx, current); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, settle, hook+" back", func() error {
			err := k8s.Create(ctx, probe.DeepCopyObject().(client.Object), client.DryRunAll)
			if apierrors.IsInvalid(err) {
				return nil
			}
			return fmt.Errorf("%s not back yet: %w", hook, err)
		})
	}
	var kept []admissionv1.ValidatingWebhook
	for _, w := range vwc.Webhooks {
		if w.Name != hook {
			kept = append(kept, w)
		}
	}
	vwc.Webhooks = kept
	if err := k8s.Update(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	defer restore()
	// The apiserver picks the new configuration up from its own informer,
	// so the hook may still be called for a moment: wait until the probe,
	// which the hook refuses, is accepted.
	testenv.Eventually(t, settle, hook+" gone", func() error {
		if err := k8s.Create(ctx, probe.DeepCopyObject().(client.Object), client.DryRunAll); err != nil {
			return fmt.Errorf("%s still called: %w", hook, err)
		}
		return nil
	})
	fn()
}
