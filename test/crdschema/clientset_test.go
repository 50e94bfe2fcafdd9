package crdschema_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakeeper/quotakeeper/api/client/clientset/versioned"
	"github.com/quotakeeper/quotakeeper/api/client/informers/externalversions"
)

// An owning service's way in (the API module's generated clients): the
// clientset creates a claim, the shared informer's lister then holds it, and
// a cluster-scoped kind's miss names our resource.
func TestGeneratedClientsetInformerAndLister(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := versioned.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	claim := validClaim("from-the-clientset")
	created, err := cs.QuotaV1alpha1().ResourceClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create through the clientset: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.QuotaV1alpha1().ResourceClaims(claim.Namespace).Delete(context.Background(), claim.Name, metav1.DeleteOptions{})
	})
	if created.UID == "" {
		t.Fatal("the created claim has no uid")
	}

	factory := externalversions.NewSharedInformerFactoryWithOptions(cs, 0, externalversions.WithNamespace(claim.Namespace))
	lister := factory.Quota().V1alpha1().ResourceClaims().Lister()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for typ, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			t.Fatalf("informer for %v did not sync", typ)
		}
	}
	got, err := lister.ResourceClaims(claim.Namespace).Get(claim.Name)
	if err != nil {
		t.Fatalf("lister: %v", err)
	}
	if diff := cmp.Diff(claim.Spec, got.Spec); diff != "" {
		t.Errorf("the lister's claim spec differs from the one created (-created +listed):\n%s", diff)
	}
	if got.UID != created.UID {
		t.Errorf("listed uid %q, created %q", got.UID, created.UID)
	}

	_, err = cs.QuotaV1alpha1().ResourceRegistrations().Get(ctx, "no-such-registration", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("get of a missing registration: %v, want NotFound", err)
	}
	if want := `resourceregistrations.quota.miloapis.com "no-such-registration" not found`; err.Error() != want {
		t.Errorf("not-found message %q, want %q", err.Error(), want)
	}
}
