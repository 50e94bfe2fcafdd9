package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotakeeper/quotakeeper/api/ledgerconv"
	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/controllers"
	"github.com/quotakeeper/quotakeeper/ledger"
	"github.com/quotakeeper/quotakeeper/test/builders"
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
	if err := k8s.Create(ctx, reg); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, reg, quotav1alpha1.ConditionActive, metav1.ConditionTrue, quotav1alpha1.ReasonRegistrationActive)
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
	if err := k8s.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, g, quotav1alpha1.ConditionActive, metav1.ConditionTrue, quotav1alpha1.ReasonGrantActive)
	return g
}

// waitCondition waits for obj's condition of type to have status and
// reason for obj's current generation, and returns its message.
func waitCondition(t *testing.T, obj client.Object, typ string, status metav1.ConditionStatus, reason string) string {
	t.Helper()
	var msg string
	testenv.Eventually(t, settle, "condition "+typ, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *quotav1alpha1.ResourceRegistration:
			conds = o.Status.Conditions
		case *quotav1alpha1.ResourceGrant:
			conds = o.Status.Conditions
		case *quotav1alpha1.ResourceClaim:
			conds = o.Status.Conditions
		case *quotav1alpha1.AllowanceBucket:
			conds = o.Status.Conditions
		}
		c := meta.FindStatusCondition(conds, typ)
		if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != obj.GetGeneration() {
			return fmt.Errorf("%s %s: condition %s = %+v, want %s/%s for generation %d", obj.GetObjectKind().GroupVersionKind().Kind,
				obj.GetName(), typ, c, status, reason, obj.GetGeneration())
		}
		msg = c.Message
		return nil
	})
	return msg
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

// requireInvalid asserts err is a 422 Invalid whose causes include one for
// field with exactly message want, as the webhook words it.
func requireInvalid(t *testing.T, err error, field, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want %s rejected with %q", field, want)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) || status.Status().Details == nil {
		t.Fatalf("want Invalid with details, got %v", err)
	}
	var seen []string
	for _, c := range status.Status().Details.Causes {
		seen = append(seen, c.Field+": "+c.Message)
		if c.Field == field && c.Message == want {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("message %q does not carry %q", err.Error(), want)
			}
			return
		}
	}
	t.Fatalf("no cause %s: %q; causes:\n  %s", field, want, strings.Join(seen, "\n  "))
}

// requireAgreement asserts that every bucket of the consumers agrees with
// the claims: each granted claim's amount is allocated under its ledger id,
// nothing else is, no reservation is left, and the totals add up.
func requireAgreement(t *testing.T, consumers ...ledger.Consumer) {
	t.Helper()
	var claims quotav1alpha1.ResourceClaimList
	if err := k8s.List(ctx, &claims); err != nil {
		t.Fatal(err)
	}
	var buckets quotav1alpha1.AllowanceBucketList
	if err := k8s.List(ctx, &buckets); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for i := range buckets.Items {
		b := &buckets.Items[i]
		key := ledgerconv.KeyOf(b)
		if !slices.Contains(consumers, key.Consumer) {
			continue
		}
		checked++
		want := map[string]int64{}
		for j := range claims.Items {
			c := &claims.Items[j]
			cond := meta.FindStatusCondition(c.Status.Conditions, quotav1alpha1.ConditionGranted)
			if cond == nil || cond.Status != metav1.ConditionTrue || c.DeletionTimestamp != nil {
				continue
			}
			lc := controllers.LedgerClaim(c)
			for _, r := range lc.Requests {
				if ledger.NewBucketKey(r.Consumer, r.ResourceType, r.Dimensions) == key {
					want[lc.ID] += r.Amount
				}
			}
		}
		got := map[string]int64{}
		var sum int64
		for _, a := range b.Status.Allocations {
			got[a.ID] = a.Amount
			sum += a.Amount
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("bucket %s {%s}: allocations %v, granted claims say %v", key.ResourceType, key.Dimensions, got, want)
		}
		if len(b.Status.Reservations) != 0 {
			t.Errorf("bucket %s {%s}: reservations left: %+v", key.ResourceType, key.Dimensions, b.Status.Reservations)
		}
		if b.Status.Allocated != sum || b.Status.Available != max(b.Status.Limit-sum, 0) || int(b.Status.ClaimCount) != len(got) {
			t.Errorf("bucket %s {%s}: totals %v disagree with %d allocations summing to %d", key.ResourceType, key.Dimensions, usageOf(b), len(got), sum)
		}
	}
	if checked == 0 {
		t.Errorf("no buckets of %v to check", consumers)
	}
}
