package controllers_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/controllers"
	"github.com/quotakeeper/quotakeeper/internal/counting"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/managertest"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// settle bounds how long the controllers may take to converge. Everything
// here is event driven and settles in well under a second; the margin is
// for a loaded two-core machine running the race detector.
const settle = 30 * time.Second

var ctx = context.Background()

func orgConsumer(name string) ledger.Consumer {
	return ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: name}
}

func nsConsumer(name string) ledger.Consumer { return ledger.Consumer{Kind: "Namespace", Name: name} }

var organizationType = quotav1alpha1.ConsumerTypeRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization"}

func newNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	if err := k8s.Create(ctx, builders.Namespace(name).Labels(labels).Obj()); err != nil {
		t.Fatal(err)
	}
}

// tenantOf labels a namespace as belonging to an organization.
func tenantOf(org string) map[string]string {
	return map[string]string{quotav1alpha1.ConsumerLabelKey("resourcemanager.miloapis.com", "Organization"): org}
}

func newRegistration(t *testing.T, name, rt string, consumer quotav1alpha1.ConsumerTypeRef, dims ...string) *quotav1alpha1.ResourceRegistration {
	t.Helper()
	reg := builders.Registration(name, rt).Consumer(consumer).Type(quotav1alpha1.RegistrationTypeAllocation).
		BaseUnit("unit").Dimensions(dims...).ClaimingResources(quotav1alpha1.GroupKind{Kind: "ConfigMap"}).Obj()
	managertest.CreateActive(t, k8s, settle, reg, quotav1alpha1.ReasonRegistrationActive)
	return reg
}

// grantObject is a grant for c where c's buckets live.
func grantObject(name string, c ledger.Consumer, allowances ...quotav1alpha1.Allowance) *quotav1alpha1.ResourceGrant {
	return builders.Grant(name, quotav1alpha1.BucketNamespace(ledgerconv.ConsumerRef(c), sysNS)).Consumer(ledgerconv.ConsumerRef(c)).Allowances(allowances...).Obj()
}

// newGrant creates a grant where its consumer's buckets live and waits for
// it to be Active.
func newGrant(t *testing.T, name string, c ledger.Consumer, allowances ...quotav1alpha1.Allowance) *quotav1alpha1.ResourceGrant {
	t.Helper()
	g := grantObject(name, c, allowances...)
	managertest.CreateActive(t, k8s, settle, g, quotav1alpha1.ReasonGrantActive)
	return g
}

// waitCondition waits for obj's condition of type to have status and
// reason for obj's current generation, and returns its message.
func waitCondition(t *testing.T, obj quotav1alpha1.ConditionGetter, typ string, status metav1.ConditionStatus, reason string) string {
	t.Helper()
	return testenv.WaitCondition(t, k8s, settle, obj, typ, status, reason)
}

func claimObject(ns, name string, c ledger.Consumer, reqs ...quotav1alpha1.ResourceRequest) *quotav1alpha1.ResourceClaim {
	return builders.Claim(name, ns).Consumer(ledgerconv.ConsumerRef(c)).Requests(reqs...).Obj()
}

func newClaim(t *testing.T, ns, name string, c ledger.Consumer, reqs ...quotav1alpha1.ResourceRequest) *quotav1alpha1.ResourceClaim {
	t.Helper()
	claim := claimObject(ns, name, c, reqs...)
	if err := k8s.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	return claim
}

// waitDecided waits for a decision (Granted True or False) and returns the
// claim as decided.
func waitDecided(t *testing.T, claim *quotav1alpha1.ResourceClaim) *quotav1alpha1.ResourceClaim {
	t.Helper()
	testenv.Eventually(t, settle, "claim "+claim.Name+" decided", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return err
		}
		c := meta.FindStatusCondition(claim.Status.Conditions, quotav1alpha1.ConditionGranted)
		if c == nil || c.Status == metav1.ConditionUnknown || c.ObservedGeneration != claim.Generation {
			return fmt.Errorf("claim %s not decided: %+v", claim.Name, c)
		}
		return nil
	})
	return claim
}

// grantedCondition is the claim's Granted condition; a claim not decided yet
// has none, which reads as a zero condition (status "").
func grantedCondition(claim *quotav1alpha1.ResourceClaim) metav1.Condition {
	if c := meta.FindStatusCondition(claim.Status.Conditions, quotav1alpha1.ConditionGranted); c != nil {
		return *c
	}
	return metav1.Condition{}
}

type usage struct{ limit, allocated, reserved, available int64 }

func (u usage) String() string {
	return fmt.Sprintf("{limit %d, allocated %d, reserved %d, available %d}", u.limit, u.allocated, u.reserved, u.available)
}

func bucketKey(c ledger.Consumer, rt string, dims map[string]string) ledger.BucketKey {
	return ledger.NewBucketKey(c, rt, dims)
}

func getBucket(key ledger.BucketKey) (*quotav1alpha1.AllowanceBucket, error) {
	b := &quotav1alpha1.AllowanceBucket{}
	err := k8s.Get(ctx, client.ObjectKey{Namespace: quotav1alpha1.BucketNamespace(ledgerconv.ConsumerRef(key.Consumer), sysNS), Name: key.Name()}, b)
	return b, err
}

func usageOf(b *quotav1alpha1.AllowanceBucket) usage {
	return usage{b.Status.Limit, b.Status.Allocated, b.Status.Reserved, b.Status.Available}
}

// wantBucket waits for the bucket's figures to be exactly want, and returns
// the bucket.
func wantBucket(t *testing.T, key ledger.BucketKey, want usage) *quotav1alpha1.AllowanceBucket {
	t.Helper()
	var b *quotav1alpha1.AllowanceBucket
	testenv.Eventually(t, settle, "bucket "+key.ResourceType+" figures", func() error {
		var err error
		if b, err = getBucket(key); err != nil {
			return fmt.Errorf("bucket %s %s: %w", key.ResourceType, key.Dimensions, err)
		}
		if got := usageOf(b); got != want {
			return fmt.Errorf("bucket %s {%s} = %v, want %v", key.ResourceType, key.Dimensions, got, want)
		}
		return nil
	})
	return b
}

// grantedClaims is what the Granted, live claims hold per bucket of the
// consumers: the amount under each claim's ledger id, and the namespace of
// each claim.
func grantedClaims(t *testing.T, consumers ...ledger.Consumer) (map[ledger.BucketKey]map[string]int64, map[string]string) {
	t.Helper()
	held := map[ledger.BucketKey]map[string]int64{}
	namespaces := map[string]string{}
	for _, c := range listGranted(t) {
		lc := controllers.LedgerClaim(c)
		namespaces[lc.ID] = c.Namespace
		for _, r := range lc.Requests {
			key := ledger.NewBucketKey(r.Consumer, r.ResourceType, r.Dimensions)
			if !slices.Contains(consumers, key.Consumer) {
				continue
			}
			if held[key] == nil {
				held[key] = map[string]int64{}
			}
			held[key][lc.ID] += r.Amount
		}
	}
	return held, namespaces
}

// listGranted lists the Granted claims that are not being deleted.
func listGranted(t *testing.T) []*quotav1alpha1.ResourceClaim {
	t.Helper()
	var claims quotav1alpha1.ResourceClaimList
	if err := k8s.List(ctx, &claims); err != nil {
		t.Fatal(err)
	}
	var out []*quotav1alpha1.ResourceClaim
	for i := range claims.Items {
		c := &claims.Items[i]
		cond := meta.FindStatusCondition(c.Status.Conditions, quotav1alpha1.ConditionGranted)
		if cond == nil || cond.Status != metav1.ConditionTrue || c.DeletionTimestamp != nil {
			continue
		}
		out = append(out, c)
	}
	return out
}

// consumerBuckets lists the buckets of the consumers.
func consumerBuckets(t *testing.T, consumers ...ledger.Consumer) []quotav1alpha1.AllowanceBucket {
	t.Helper()
	var buckets quotav1alpha1.AllowanceBucketList
	if err := k8s.List(ctx, &buckets); err != nil {
		t.Fatal(err)
	}
	var out []quotav1alpha1.AllowanceBucket
	for _, b := range buckets.Items {
		if slices.Contains(consumers, ledgerconv.KeyOf(&b).Consumer) {
			out = append(out, b)
		}
	}
	return out
}

// observeClaims counts the consumers' Granted claims into their buckets as
// the observer does (a Granted claim counts its requests, package
// counting's Amounts, summed by a counting.Tally; its fold id is its uid),
// writing through the stand-in's ledger. The manager alone leaves a Granted
// claim as a reservation; this is what turns it into allocated.
func observeClaims(t *testing.T, consumers ...ledger.Consumer) {
	t.Helper()
	tally := counting.NewTally()
	for _, c := range listGranted(t) {
		lc := controllers.LedgerClaim(c)
		amounts, err := counting.Amounts([]ledger.Claim{lc})
		if err != nil {
			t.Fatalf("claim %s/%s: %v", c.Namespace, c.Name, err)
		}
		maps.DeleteFunc(amounts, func(key ledger.BucketKey, _ int64) bool { return !slices.Contains(consumers, key.Consumer) })
		tally.Set(lc.ID, counting.Object{UID: lc.ID, Generation: c.Generation, Namespace: c.Namespace, Amounts: amounts})
	}
	keys := tally.Buckets()
	for _, b := range consumerBuckets(t, consumers...) {
		keys = append(keys, ledgerconv.KeyOf(&b)) // a bucket no claim counts in any more: zero
	}
	slices.SortFunc(keys, counting.CompareKeys)
	for _, key := range slices.Compact(keys) {
		o, err := tally.Observation(key)
		if err != nil {
			t.Fatalf("observe %s {%s}: %v", key.ResourceType, key.Dimensions, err)
		}
		o.Fold = slices.Sorted(maps.Keys(o.Counted))
		if _, err := obs.ledger.Observe(ctx, key, o); err != nil {
			t.Fatalf("observe %s {%s}: %v", key.ResourceType, key.Dimensions, err)
		}
	}
}

// requireAgreement asserts that every bucket of the consumers agrees with
// the claims: each Granted claim's amount is held once, as a reservation
// under its uid or (once observed) in allocated, nothing else is held, and
// the totals add up.
func requireAgreement(t *testing.T, consumers ...ledger.Consumer) {
	t.Helper()
	held, _ := grantedClaims(t, consumers...)
	buckets := consumerBuckets(t, consumers...)
	for i := range buckets {
		b := &buckets[i]
		key := ledgerconv.KeyOf(b)
		var sum, reserved int64
		for _, amount := range held[key] {
			sum += amount
		}
		for _, r := range b.Status.Reservations {
			reserved += r.Amount
			if want, ok := held[key][r.ID]; !ok || want != r.Amount {
				t.Errorf("bucket %s {%s}: reservation %s of %d, the Granted claims hold %v", key.ResourceType, key.Dimensions, r.ID, r.Amount, held[key])
			}
		}
		u := usageOf(b)
		if u.allocated+u.reserved != sum || u.reserved != reserved || u.available != max(u.limit-sum, 0) {
			t.Errorf("bucket %s {%s}: totals %v, the Granted claims hold %d", key.ResourceType, key.Dimensions, u, sum)
		}
	}
	if len(buckets) == 0 {
		t.Errorf("no buckets of %v to check", consumers)
	}
}

// createConfigMapRegistration registers a namespace-consumed resource type.
func createConfigMapRegistration(ctx context.Context) error {
	reg := builders.Registration("configmaps-per-namespace", rtConfigMaps).Consumer(quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"}).
		Type(quotav1alpha1.RegistrationTypeEntity).BaseUnit("configmap").ClaimingResources(quotav1alpha1.GroupKind{Kind: "ConfigMap"}).Obj()
	return k8s.Create(ctx, reg)
}

// wantEvent waits for the Event recorded on obj with the given type and
// reason, and checks its action and note.
func wantEvent(t *testing.T, obj client.Object, eventType, reason, action, note string) {
	t.Helper()
	testenv.Eventually(t, settle, fmt.Sprintf("%s event on %s", reason, obj.GetName()), func() error {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.UID != obj.GetUID() {
				continue
			}
			if e.Type == eventType && e.Reason == reason && e.Action == action && e.Note == note {
				return nil
			}
			seen = append(seen, fmt.Sprintf("%s/%s/%s: %s", e.Type, e.Reason, e.Action, e.Note))
		}
		return fmt.Errorf("no %s/%s/%s event %q on %s; it has %q", eventType, reason, action, note, obj.GetName(), seen)
	})
}
