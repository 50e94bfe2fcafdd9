package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// Issue 10's cases: a bucket's allocated is what the live objects count,
// observed by the manager; admission only reserves the in-flight window.

// deploymentUpdates is the webhook rule for updates of Deployments.
var deploymentUpdates = admissionregistrationv1.RuleWithOperations{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
	Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
}

// cpuQuota registers resourceType (millicores, counted against namespaces,
// claimed by Deployments), grants ns amount of it, and applies a
// QuotaAllocation constraint counting replicas x requests.cpu of the
// Deployments in ns. It returns the namespace's consumer.
// cores: CPU is counted in millicores and shown in cores, so denials show
// both.
var cores = quotav1alpha1.Units{BaseUnit: "millicores", DisplayUnit: "cores", UnitConversionFactor: 1000}

// The constraint also checks the Deployments' scale subresource, as
// docs/policy-authoring.md shows and the manager's webhook requires of a
// count of replicas: autoscaling/Scale in match.kinds and Deployment in
// parameters.scaleTargets.
func cpuQuota(t *testing.T, ns, resourceType string, amount int64) quotav1alpha1.ConsumerRef {
	t.Helper()
	namespace(t, ns, nil)
	registrationIn(t, cores, resourceType, quotav1alpha1.RegistrationTypeAllocation, namespaceConsumer,
		quotav1alpha1.GroupKind{APIGroup: "apps", Kind: "Deployment"})
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	grant(t, "cpu", consumer, resourceType, amount)
	kinds := []any{
		map[string]any{"apiGroups": []any{"apps"}, "kinds": []any{"Deployment"}},
		map[string]any{"apiGroups": []any{"autoscaling"}, "kinds": []any{"Scale"}},
	}
	parameters := map[string]any{
		"resourceType": resourceType,
		"claimViews":   true,
		"amount":       map[string]any{"resource": "cpu", "replicasPath": []any{"spec", "replicas"}, "unit": "m"},
		"scaleTargets": []any{map[string]any{"apiGroup": "apps", "kind": "Deployment"}},
	}
	quotaConstraint(t, "QuotaAllocation", ns, map[string]any{
		"match":      map[string]any{"kinds": kinds, "namespaces": []any{ns}},
		"parameters": parameters,
	})
	return consumer
}

// deployment is a Deployment of replicas pods of one container requesting cpu.
// No deployment controller runs here: only the Deployment object exists.
func deployment(ns, name string, replicas int32, cpu string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:      "app",
					Image:     "registry.example.com/web:1.0",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
				}}},
			},
		},
	}
}

// scale updates d (read afresh into d) to replicas, adding labels, and
// returns the update's error.
func scale(t *testing.T, d *appsv1.Deployment, replicas int32, labels map[string]string, opts ...client.UpdateOption) error {
	t.Helper()
	if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	d.Spec.Replicas = &replicas
	for k, v := range labels {
		if d.Labels == nil {
			d.Labels = map[string]string{}
		}
		d.Labels[k] = v
	}
	return cluster.Client.Update(context.Background(), d, opts...)
}

func mustScale(t *testing.T, d *appsv1.Deployment, replicas int32) {
	t.Helper()
	if err := scale(t, d, replicas, nil); err != nil {
		t.Fatalf("scale %s to %d: %v", d.Name, replicas, err)
	}
}

// 3 replicas x 500m against 2000m, scaled to 2 and back to 3: each step is
// admitted and counted exactly; growth past the grant is denied with the
// observed numbers; the delete returns everything.
func TestScalingDownAndUpCountsWhatRuns(t *testing.T) {
	t.Parallel()
	const ns, rt = "e2e-scale", "e2e.quota/scale-cpu"
	consumer := cpuQuota(t, ns, rt, 2000)

	web := deployment(ns, "web", 3, "500m")
	create(t, web)
	waitBucket(t, consumer, rt, 1500, 0)
	before := waitViewAmount(t, ns, "web", 1500)
	mustScale(t, web, 2)
	waitBucket(t, consumer, rt, 1000, 0)
	// The view follows: its spec is immutable, so it is written again
	// under the same name.
	if after := waitViewAmount(t, ns, "web", 1000); after.Name != before.Name || after.UID == before.UID {
		t.Fatalf("view after the scale: %s (uid %s), want %s written again", after.Name, after.UID, before.Name)
	}
	mustScale(t, web, 3)
	waitBucket(t, consumer, rt, 1500, 0)
	waitViewAmount(t, ns, "web", 1500)

	// Denied with the observed numbers; a denial holds nothing, so asking
	// again until Gatekeeper's cache of the bucket has caught up is harmless.
	want := "quota exceeded for Namespace " + ns + ": requested 1000 of " + rt + ", available 500 of 2000 (allocated 1500, reserved 0)" +
		"; in cores (1000 millicores each): requested 1, available 0.5 of 2 (allocated 1.5, reserved 0)" + seeEffective(ns, consumer, rt)
	testenv.Eventually(t, 10*time.Second, "scale to 5 denied with the observed numbers", func() error {
		if err := scale(t, web, 5, nil); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("want a denial saying %q, got %w", want, err)
		}
		return nil
	})
	if st := bucket(t, consumer, rt); st.Allocated != 1500 || st.Reserved != 0 {
		t.Fatalf("after the denial: allocated %d reserved %d", st.Allocated, st.Reserved)
	}
	// The EffectiveResourceGrant the denial names is there, in the tenant's
	// namespace, with the same numbers in both units.
	testenv.Eventually(t, 30*time.Second, "the EffectiveResourceGrant the denial names", func() error {
		e := &quotav1alpha1.EffectiveResourceGrant{}
		key := client.ObjectKey{Namespace: ns, Name: quotav1alpha1.EffectiveResourceGrantName(consumer, rt)}
		if err := cluster.Client.Get(context.Background(), key, e); err != nil {
			return err
		}
		wantDisplay := quotav1alpha1.DisplayTotals{Limit: "2 cores", Allocated: "1.5 cores", Reserved: "0 cores", Available: "0.5 cores"}
		if e.Status.Units == nil || *e.Status.Units != cores || e.Status.Display == nil || *e.Status.Display != wantDisplay ||
			e.Status.TotalLimit != 2000 || e.Status.TotalAllocated != 1500 || e.Status.Available != 500 {
			return fmt.Errorf("status %+v (units %+v, display %+v)", e.Status, e.Status.Units, e.Status.Display)
		}
		return nil
	})
	mustScale(t, web, 4)
	waitBucket(t, consumer, rt, 2000, 0)
	if st := bucket(t, consumer, rt); st.ClaimCount != 1 || st.Available != 0 {
		t.Fatalf("at the grant: claimCount %d available %d", st.ClaimCount, st.Available)
	}

	if err := cluster.Client.Delete(context.Background(), web); err != nil {
		t.Fatal(err)
	}
	waitBucket(t, consumer, rt, 0, 0)
}

// scaleSubresource sets d's replicas through its scale subresource, as a
// HorizontalPodAutoscaler does (read the Scale, update it), and returns the
// error.
func scaleSubresource(t *testing.T, d *appsv1.Deployment, replicas int32) error {
	t.Helper()
	deployments := kubernetes.NewForConfigOrDie(cluster.Config).AppsV1().Deployments(d.Namespace)
	s, err := deployments.GetScale(context.Background(), d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Replicas = replicas
	_, err = deployments.UpdateScale(context.Background(), d.Name, s, metav1.UpdateOptions{})
	return err
}

// kubectlScale is `kubectl scale deployment --replicas`: a merge patch of
// the scale subresource.
func kubectlScale(d *appsv1.Deployment, replicas int32) error {
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	_, err := kubernetes.NewForConfigOrDie(cluster.Config).AppsV1().Deployments(d.Namespace).
		Patch(context.Background(), d.Name, k8stypes.MergePatchType, patch, metav1.PatchOptions{}, "scale")
	return err
}

// denial is the API server's error text for a denial by Gatekeeper.
func denial(constraint, msg string) string {
	return fmt.Sprintf("admission webhook %q denied the request: [%s] %s", "validation.gatekeeper.sh", constraint, msg)
}

// kubectl scale (a patch) and an autoscaler (an update) through the scale
// subresource, with a constraint that checks Deployments' scales: 3 x 500m
// under 2000m, scaling to 20 is denied with exactly the message of the same
// update of spec.replicas and holds nothing; scaling to 4 is admitted and
// counted, and the bucket settles at exactly the grant.
func TestScaleSubresourceIsCheckedLikeAnUpdateOfReplicas(t *testing.T) {
	t.Parallel()
	const ns, rt = "e2e-scale-subresource", "e2e.quota/scale-subresource-cpu"
	consumer := cpuQuota(t, ns, rt, 2000)
	web := deployment(ns, "web", 3, "500m")
	create(t, web)
	waitBucket(t, consumer, rt, 1500, 0)

	want := denial(ns, "quota exceeded for Namespace "+ns+": requested 8500 of "+rt+", available 500 of 2000 (allocated 1500, reserved 0)"+
		"; in cores (1000 millicores each): requested 8.5, available 0.5 of 2 (allocated 1.5, reserved 0)"+seeEffective(ns, consumer, rt))
	if err := scale(t, web.DeepCopy(), 20, nil); !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("update of spec.replicas to 20:\n got %v\nwant %s", err, want)
	}
	// Until Gatekeeper has synced web, the scale is denied asking to sync or
	// retry (fail closed); then with the update's message.
	testenv.Eventually(t, 30*time.Second, "kubectl scale to 20 denied like the update", func() error {
		if err := kubectlScale(web, 20); !apierrors.IsForbidden(err) || err.Error() != want {
			return fmt.Errorf("want %s, got %w", want, err)
		}
		return nil
	})
	if err := scaleSubresource(t, web, 20); !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("an autoscaler's scale to 20:\n got %v\nwant %s", err, want)
	}
	if st := bucket(t, consumer, rt); st.Allocated != 1500 || st.Reserved != 0 {
		t.Fatalf("after the denials: allocated %d reserved %d, want 1500 and 0", st.Allocated, st.Reserved)
	}

	if err := kubectlScale(web, 4); err != nil {
		t.Fatalf("kubectl scale to 4: %v", err)
	}
	if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(web), web); err != nil {
		t.Fatal(err)
	}
	if *web.Spec.Replicas != 4 || web.Generation != 2 {
		t.Fatalf("web after the scale: %d replicas at generation %d, want 4 at 2", *web.Spec.Replicas, web.Generation)
	}
	waitBucket(t, consumer, rt, 2000, 0)
	if st := bucket(t, consumer, rt); st.Available != 0 || st.ClaimCount != 1 || len(st.Reservations) != 0 {
		t.Fatalf("at the grant: available %d claimCount %d reservations %+v", st.Available, st.ClaimCount, st.Reservations)
	}
	// Nothing is left for one more replica, through either path.
	full := denial(ns, "quota exceeded for Namespace "+ns+": requested 500 of "+rt+", available 0 of 2000 (allocated 2000, reserved 0)"+
		"; in cores (1000 millicores each): requested 0.5, available 0 of 2 (allocated 2, reserved 0)"+seeEffective(ns, consumer, rt))
	testenv.Eventually(t, 30*time.Second, "scale to 5 denied", func() error {
		if err := scaleSubresource(t, web, 5); !apierrors.IsForbidden(err) || err.Error() != full {
			return fmt.Errorf("want %s, got %w", full, err)
		}
		return nil
	})
	waitBucket(t, consumer, rt, 2000, 0)
}

// An update whose growth Gatekeeper reserved, rejected by a later webhook,
// never counts: its reservation, keyed by the generation it would have
// produced, expires, and the object keeps counting what it is.
func TestARejectedUpdateLeaksNothing(t *testing.T) {
	t.Parallel()
	const ns, rt = "e2e-rejected", "e2e.quota/rejected-cpu"
	consumer := cpuQuota(t, ns, rt, 2000)
	web := deployment(ns, "web", 2, "500m")
	create(t, web)
	waitBucket(t, consumer, rt, 1000, 0)

	denyLater(t, ns, deploymentUpdates)
	rejected := map[string]string{denyLaterLabel: "true"}
	testenv.Eventually(t, time.Minute, "deny-later webhook serving", func() error {
		err := scale(t, web.DeepCopy(), 3, rejected, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "denied later") {
			return fmt.Errorf("dry run: %w", err)
		}
		return nil
	})

	err := scale(t, web, 3, rejected)
	if err == nil || !strings.Contains(err.Error(), "denied later in the admission chain") {
		t.Fatalf("want the second webhook's denial, got %v", err)
	}
	// Gatekeeper reserved the growth under <uid>/<the generation the update would have had>/<growth>.
	if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(web), web); err != nil {
		t.Fatal(err)
	}
	st := bucket(t, consumer, rt)
	wantID := fmt.Sprintf("%s/%d/500", web.UID, web.Generation+1)
	if st.Allocated != 1000 || st.Reserved != 500 || len(st.Reservations) != 1 || st.Reservations[0].ID != wantID {
		t.Fatalf("after the later denial: allocated %d reserved %d reservations %+v, want 1000, 500 and one reservation %s",
			st.Allocated, st.Reserved, st.Reservations, wantID)
	}
	// The object never reaches that generation: the reservation expires.
	testenv.Eventually(t, reservationTTL+45*time.Second, "the rejected update's reservation expired", func() error {
		if st := bucket(t, consumer, rt); st.Allocated != 1000 || st.Reserved != 0 {
			return fmt.Errorf("allocated %d reserved %d", st.Allocated, st.Reserved)
		}
		return nil
	})

	mustScale(t, web, 3)
	waitBucket(t, consumer, rt, 1500, 0)
}

// ConfigMaps created before their quota constraint are counted once it
// exists, and the quota left is what they leave.
func TestObjectsCreatedBeforeTheConstraintAreCounted(t *testing.T) {
	t.Parallel()
	const ns, rt = "e2e-predate", "e2e.quota/predate-configmaps"
	namespace(t, ns, nil)
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
	grant(t, "configmaps", consumer, rt, 5)
	for i := 1; i <= 3; i++ {
		mustAdmit(t, ns, fmt.Sprintf("cm-%d", i))
	}

	quotaEntity(t, "e2e-predate", []string{ns}, map[string]any{"resourceType": rt})
	waitBucket(t, consumer, rt, 3, 0)
	mustAdmit(t, ns, "cm-4")
	mustAdmit(t, ns, "cm-5")
	mustDeny(t, ns, "cm-6", "requested 1 of "+rt, "available 0 of 5")
	waitBucket(t, consumer, rt, 5, 0)
}

// Moving a namespace to another organization (relabelling it) moves what
// its objects count: the old organization pays nothing any more.
func TestRelabellingANamespaceMovesItsUsage(t *testing.T) {
	t.Parallel()
	const ns, rt = "e2e-relabel", "e2e.quota/relabel-configmaps"
	orgLabel := quotav1alpha1.ConsumerLabelKey(orgGroup, "Organization")
	namespace(t, ns, map[string]string{orgLabel: "e2e-relabel-a"})
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, orgConsumer)
	a := quotav1alpha1.ConsumerRef{APIGroup: orgGroup, Kind: "Organization", Name: "e2e-relabel-a"}
	b := quotav1alpha1.ConsumerRef{APIGroup: orgGroup, Kind: "Organization", Name: "e2e-relabel-b"}
	grant(t, "e2e-relabel-a", a, rt, 5)
	grant(t, "e2e-relabel-b", b, rt, 5)
	quotaEntity(t, "e2e-relabel", []string{ns}, map[string]any{
		"resourceType": rt,
		"consumers":    []any{map[string]any{"apiGroup": orgGroup, "kind": "Organization"}},
	})
	mustAdmit(t, ns, "cm-1")
	mustAdmit(t, ns, "cm-2")
	waitBucket(t, a, rt, 2, 0)
	assertNamespaces(t, a, rt, map[string]int64{ns: 2})

	obj := &corev1.Namespace{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: ns}, obj); err != nil {
		t.Fatal(err)
	}
	obj.Labels[orgLabel] = "e2e-relabel-b"
	if err := cluster.Client.Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	waitBucket(t, b, rt, 2, 0)
	waitBucket(t, a, rt, 0, 0)
	assertNamespaces(t, a, rt, map[string]int64{})
	assertNamespaces(t, b, rt, map[string]int64{ns: 2})

	// New objects count against the new organization too.
	mustAdmit(t, ns, "cm-3")
	waitBucket(t, b, rt, 3, 0)
	waitBucket(t, a, rt, 0, 0)
}

// A quota constraint that only warns (or only records, dryrun) admits past
// its limit and never holds quota: nothing is counted, and whatever the
// admission path reserved drains within the reservation TTL.
func TestWarnAndDryrunConstraintsHoldNothing(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"warn", "dryrun"} {
		t.Run(action, func(t *testing.T) {
			ns, rt := "e2e-"+action, "e2e.quota/"+action+"-configmaps"
			namespace(t, ns, nil)
			registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
			consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}
			grant(t, "configmaps", consumer, rt, 1)
			quotaConstraint(t, "QuotaEntity", ns, map[string]any{
				"enforcementAction": action,
				"match": map[string]any{
					"kinds":      []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"ConfigMap"}}},
					"namespaces": []any{ns},
				},
				"parameters": map[string]any{"resourceType": rt},
			})
			for i := 1; i <= 3; i++ {
				mustAdmit(t, ns, fmt.Sprintf("cm-%d", i))
			}
			testenv.Eventually(t, reservationTTL+45*time.Second, "nothing held", func() error {
				st, err := getBucket(consumer, rt)
				if apierrors.IsNotFound(err) {
					return nil
				}
				if err != nil {
					return err
				}
				if st.Allocated != 0 {
					t.Fatalf("a %s constraint counted %d", action, st.Allocated)
				}
				if st.Reserved != 0 {
					return errors.New("still reserved")
				}
				return nil
			})
			if st, err := getBucket(consumer, rt); err == nil && (st.Allocated != 0 || st.Reserved != 0 || st.ClaimCount != 0) {
				t.Fatalf("a %s constraint holds allocated %d reserved %d claimCount %d", action, st.Allocated, st.Reserved, st.ClaimCount)
			}
		})
	}
}
