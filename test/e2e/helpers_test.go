package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

const orgGroup = "resourcemanager.miloapis.com"

var (
	namespaceConsumer = quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"}
	orgConsumer       = quotav1alpha1.ConsumerTypeRef{APIGroup: orgGroup, Kind: "Organization"}
)

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := cluster.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func namespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	create(t, builders.Namespace(name).Labels(labels).Obj())
}

// registration registers resourceType, claimed by ConfigMaps unless other
// kinds are given, and waits until it is Active.
func registration(t *testing.T, resourceType string, typ quotav1alpha1.RegistrationType, consumer quotav1alpha1.ConsumerTypeRef, claiming ...quotav1alpha1.GroupKind) {
	t.Helper()
	registrationIn(t, quotav1alpha1.Units{BaseUnit: "count"}, resourceType, typ, consumer, claiming...)
}

// registrationIn is registration with units.
func registrationIn(t *testing.T, units quotav1alpha1.Units, resourceType string, typ quotav1alpha1.RegistrationType, consumer quotav1alpha1.ConsumerTypeRef, claiming ...quotav1alpha1.GroupKind) {
	t.Helper()
	if len(claiming) == 0 {
		claiming = []quotav1alpha1.GroupKind{{Kind: "ConfigMap"}}
	}
	name := strings.NewReplacer("/", "-", ".", "-").Replace(resourceType)
	reg := builders.Registration(name, resourceType).Consumer(consumer).Type(typ).BaseUnit(units.BaseUnit).
		DisplayUnit(units.DisplayUnit, units.UnitConversionFactor).ClaimingResources(claiming...).Obj()
	create(t, reg)
	testenv.Eventually(t, time.Minute, "registration "+name+" Active", func() error {
		got := &quotav1alpha1.ResourceRegistration{}
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(reg), got); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, quotav1alpha1.ConditionActive) {
			return fmt.Errorf("conditions %+v", got.Status.Conditions)
		}
		return nil
	})
}

// seeEffective is how a denial ends: where the tenant of namespace ns reads
// the numbers of consumer's quota of resourceType.
func seeEffective(ns string, consumer quotav1alpha1.ConsumerRef, resourceType string) string {
	return fmt.Sprintf("; see EffectiveResourceGrant %s/%s (kubectl quota usage -n %s)",
		ns, quotav1alpha1.EffectiveResourceGrantName(consumer, resourceType), ns)
}

// grant gives consumer amount of resourceType, in the namespace its buckets
// live in, and waits until the grant is Active.
func grant(t *testing.T, name string, consumer quotav1alpha1.ConsumerRef, resourceType string, amount int64) {
	t.Helper()
	ns := quotav1alpha1.BucketNamespace(consumer, quotav1alpha1.DefaultSystemNamespace)
	g := builders.Grant(name, ns).Consumer(consumer).Allowance(resourceType, amount).Obj()
	create(t, g)
	testenv.Eventually(t, time.Minute, "grant "+name+" Active", func() error {
		got := &quotav1alpha1.ResourceGrant{}
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(g), got); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, quotav1alpha1.ConditionActive) {
			return fmt.Errorf("conditions %+v", got.Status.Conditions)
		}
		return nil
	})
}

// quotaEntity creates a QuotaEntity constraint over ConfigMaps in namespaces
// and waits until every Gatekeeper replica enforces it.
func quotaEntity(t *testing.T, name string, namespaces []string, parameters map[string]any) {
	t.Helper()
	quotaConstraint(t, "QuotaEntity", name, map[string]any{
		"match": map[string]any{
			"kinds":      []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"ConfigMap"}}},
			"namespaces": toAny(namespaces),
		},
		"parameters": parameters,
	})
}

// quotaConstraint creates a constraint of kind (a quota template) with spec
// and waits until every Gatekeeper replica enforces it.
func quotaConstraint(t *testing.T, kind, name string, spec map[string]any) {
	t.Helper()
	c := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "constraints.gatekeeper.sh/v1beta1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
	if err := cluster.Apply(context.Background(), time.Minute, c); err != nil {
		t.Fatal(err)
	}
	waitEnforced(t, c.GroupVersionKind(), name)
}

// waitEnforced waits until every Gatekeeper replica enforces the constraint.
func waitEnforced(t *testing.T, gvk schema.GroupVersionKind, name string) {
	t.Helper()
	if err := cluster.WaitEnforced(context.Background(), 2*time.Minute, gvk, name); err != nil {
		t.Fatal(err)
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func configMap(namespace, name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels}}
}

// createConfigMap creates a ConfigMap and returns the admission error, if any.
func createConfigMap(namespace, name string, opts ...client.CreateOption) error {
	return cluster.Client.Create(context.Background(), configMap(namespace, name, nil), opts...)
}

func mustAdmit(t *testing.T, namespace, name string) {
	t.Helper()
	if err := createConfigMap(namespace, name); err != nil {
		t.Fatalf("ConfigMap %s/%s denied: %v", namespace, name, err)
	}
}

func mustDeny(t *testing.T, namespace, name string, wantInMessage ...string) {
	t.Helper()
	err := createConfigMap(namespace, name)
	if err == nil {
		t.Fatalf("ConfigMap %s/%s admitted past the limit", namespace, name)
	}
	if !apierrors.IsForbidden(err) {
		t.Fatalf("ConfigMap %s/%s: want a Forbidden admission denial, got %v", namespace, name, err)
	}
	for _, want := range wantInMessage {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("denial of %s/%s does not say %q:\n%v", namespace, name, want, err)
		}
	}
}

// bucketKey is the name and namespace of the bucket of consumer and resourceType.
func bucketKey(consumer quotav1alpha1.ConsumerRef, resourceType string) client.ObjectKey {
	key := ledger.NewBucketKey(ledgerconv.Consumer(consumer), resourceType, nil)
	return client.ObjectKey{
		Namespace: quotav1alpha1.BucketNamespace(ledgerconv.ConsumerRef(key.Consumer), quotav1alpha1.DefaultSystemNamespace),
		Name:      key.Name(),
	}
}

// getBucket reads the status of the bucket of consumer and resourceType.
func getBucket(consumer quotav1alpha1.ConsumerRef, resourceType string) (quotav1alpha1.AllowanceBucketStatus, error) {
	obj := &quotav1alpha1.AllowanceBucket{}
	if err := cluster.Client.Get(context.Background(), bucketKey(consumer, resourceType), obj); err != nil {
		return quotav1alpha1.AllowanceBucketStatus{}, fmt.Errorf("bucket of %s %s: %w", consumer.Name, resourceType, err)
	}
	return obj.Status, nil
}

// bucket reads the status of the bucket of consumer and resourceType, which
// must exist.
func bucket(t *testing.T, consumer quotav1alpha1.ConsumerRef, resourceType string) quotav1alpha1.AllowanceBucketStatus {
	t.Helper()
	st, err := getBucket(consumer, resourceType)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitBucket waits until the bucket exists and shows allocated and reserved.
func waitBucket(t *testing.T, consumer quotav1alpha1.ConsumerRef, resourceType string, allocated, reserved int64) {
	t.Helper()
	waitBucketWithin(t, time.Minute, consumer, resourceType, allocated, reserved)
}

// waitBucketWithin is waitBucket with a wait of its own.
func waitBucketWithin(t *testing.T, wait time.Duration, consumer quotav1alpha1.ConsumerRef, resourceType string, allocated, reserved int64) {
	t.Helper()
	testenv.Eventually(t, wait, fmt.Sprintf("bucket %s %s at allocated %d reserved %d", consumer.Name, resourceType, allocated, reserved), func() error {
		st, err := getBucket(consumer, resourceType)
		if err != nil {
			return err
		}
		if st.Allocated != allocated || st.Reserved != reserved {
			return fmt.Errorf("limit %d allocated %d reserved %d available %d reservations %+v", st.Limit, st.Allocated, st.Reserved, st.Available, st.Reservations)
		}
		return nil
	})
}

// bucketNamespaces is the bucket's status.namespaces, its allocated split
// by the counted objects' namespace. It is read as unstructured data so
// that this package does not depend on the Go field's name.
func bucketNamespaces(t *testing.T, consumer quotav1alpha1.ConsumerRef, resourceType string) map[string]int64 {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(quotav1alpha1.GroupVersion.WithKind("AllowanceBucket"))
	if err := cluster.Client.Get(context.Background(), bucketKey(consumer, resourceType), obj); err != nil {
		t.Fatal(err)
	}
	entries, _, err := unstructured.NestedSlice(obj.Object, "status", "namespaces")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, e := range entries {
		m, _ := e.(map[string]any)
		ns, _ := m["namespace"].(string)
		n, _ := m["allocated"].(int64)
		out[ns] = n
	}
	return out
}

// assertNamespaces checks the bucket's split of allocated by namespace.
func assertNamespaces(t *testing.T, consumer quotav1alpha1.ConsumerRef, resourceType string, want map[string]int64) {
	t.Helper()
	if got := bucketNamespaces(t, consumer, resourceType); !maps.Equal(got, want) {
		t.Fatalf("bucket %s %s: namespaces %v, want %v", consumer.Name, resourceType, got, want)
	}
}
