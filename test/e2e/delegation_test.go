package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

const delegatedAdminRole = "quotakeeper-delegated-quota-admin"

// bindRole binds the shipped ClusterRole to user in namespace ns.
func bindRole(t *testing.T, ns, user, role string) {
	t.Helper()
	create(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
	})
}

// raceBackoff outlasts 25 writers racing for one grant: each conflict
// means another's raise was stored.
var raceBackoff = wait.Backoff{Steps: 100, Duration: 5 * time.Millisecond, Factor: 1.2, Jitter: 1, Cap: 200 * time.Millisecond}

// setHandOut sets the amount of the delegated grant ns/name as c, on the
// grant as stored (retried on conflicts).
func setHandOut(c client.Client, ns, name string, amount func(int64) int64) error {
	return retry.RetryOnConflict(raceBackoff, func() error {
		g := &quotav1alpha1.ResourceGrant{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, g); err != nil {
			return err
		}
		g.Spec.Allowances[0].Buckets[0].Amount = amount(g.Spec.Allowances[0].Buckets[0].Amount)
		return c.Update(context.Background(), g)
	})
}

func to(n int64) func(int64) int64 { return func(int64) int64 { return n } }

func requireForbidden(t *testing.T, err error, want string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("want Forbidden %q, got %v", want, err)
	}
}

// handedOut counts what the delegated grants of one parent hand out, from
// a watch of every stored version, independently of the ledger's bucket,
// and fails the test if the sum ever exceeds the cap.
type handedOut struct {
	mu      sync.Mutex
	amounts map[string]int64
	max     int64
	events  int
}

func watchHandedOut(t *testing.T, parent quotav1alpha1.ConsumerRef, limit int64) *handedOut {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var list quotav1alpha1.ResourceGrantList
	if err := cluster.Client.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	h := &handedOut{amounts: map[string]int64{}}
	observe := func(g *quotav1alpha1.ResourceGrant, deleted bool) {
		if g.Spec.DelegatedFrom == nil || g.Spec.DelegatedFrom.ConsumerRef != parent {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		key := g.Namespace + "/" + g.Name
		if deleted {
			delete(h.amounts, key)
		} else {
			var sum int64
			for _, a := range g.Spec.Allowances {
				for _, b := range a.Buckets {
					sum += b.Amount
				}
			}
			h.amounts[key] = sum
		}
		h.events++
		var total int64
		for _, n := range h.amounts {
			total += n
		}
		h.max = max(h.max, total)
		if total > limit {
			t.Errorf("stored version %s (resourceVersion %s) hands out %d of a cap of %d: %v", key, g.ResourceVersion, total, limit, h.amounts)
		}
	}
	for i := range list.Items {
		observe(&list.Items[i], false)
	}
	wc, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: cluster.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &quotav1alpha1.ResourceGrantList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			g, ok := ev.Object.(*quotav1alpha1.ResourceGrant)
			if !ok {
				continue
			}
			observe(g, ev.Type == watch.Deleted)
		}
	}()
	return h
}

func (h *handedOut) total() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var total int64
	for _, n := range h.amounts {
		total += n
	}
	return total
}

// An organization's admins hand its cap out to its namespaces under the
// shipped role, impersonated: never more than the cap, whatever they do
// and however many at once, and never a platform grant or another
// organization's namespace.
func TestDelegatedSubdivision(t *testing.T) {
	t.Parallel()
	const rt = "e2e.quota/delegated-configmaps"
	const nsA, nsB, nsX = "e2e-deleg-a", "e2e-deleg-b", "e2e-deleg-x"
	orgLabel := quotav1alpha1.ConsumerLabelKey(orgGroup, "Organization")
	namespace(t, nsA, map[string]string{orgLabel: "e2e-deleg"})
	namespace(t, nsB, map[string]string{orgLabel: "e2e-deleg"})
	namespace(t, nsX, map[string]string{orgLabel: "e2e-deleg-other"})
	registration(t, rt, quotav1alpha1.RegistrationTypeEntity, namespaceConsumer)
	org := quotav1alpha1.ConsumerRef{APIGroup: orgGroup, Kind: "Organization", Name: "e2e-deleg"}
	grant(t, "e2e-deleg-cap", org, quotav1alpha1.DelegatedResourceType(rt), 10)
	// The platform's own grant in nsB: the organization's admins may not
	// change it.
	create(t, builders.Grant("platform", nsB).Consumer(quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: nsB}).Allowance(rt, 2).Obj())
	quotaEntity(t, "e2e-deleg", []string{nsA}, map[string]any{"resourceType": rt})
	// Two admins of the organization, one of another.
	for _, ns := range []string{nsA, nsB} {
		bindRole(t, ns, "ivan", delegatedAdminRole)
		bindRole(t, ns, "judy", delegatedAdminRole)
	}
	bindRole(t, nsX, "mallory", delegatedAdminRole)
	ivan, judy, mallory := impersonating(t, "ivan", nil), impersonating(t, "judy", nil), impersonating(t, "mallory", nil)
	counted := watchHandedOut(t, org, 10)
	ctx := context.Background()
	handOut := func(ns string, amount int64) *quotav1alpha1.ResourceGrant {
		return builders.Grant("quota", ns).Consumer(quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: ns}).DelegatedFrom(org).Allowance(rt, amount).Obj()
	}
	delegationBucket := quotav1alpha1.DelegatedResourceType(rt)

	// 6 and 4 of 10.
	if err := ivan.Create(ctx, handOut(nsA, 6)); err != nil {
		t.Fatal(err)
	}
	if err := judy.Create(ctx, handOut(nsB, 4)); err != nil {
		t.Fatal(err)
	}
	waitBucket(t, org, delegationBucket, 10, 0)
	deny := func(grant, to string) string {
		return fmt.Sprintf(`resourcegrants.quota.miloapis.com %q is forbidden: cap exceeded: Organization e2e-deleg's cap of %s is 10, handed out 10 `+
			`(6 to Namespace %s (%s/quota), 4 to Namespace %s (%s/quota)), in flight 0, available 0: cannot hand out 1 more to Namespace %s`,
			grant, rt, nsA, nsA, nsB, nsB, to)
	}
	requireForbidden(t, setHandOut(ivan, nsA, "quota", to(7)), deny("quota", nsA))
	requireForbidden(t, setHandOut(judy, nsB, "quota", to(5)), deny("quota", nsB))
	more := handOut(nsB, 1)
	more.Name = "more"
	requireForbidden(t, judy.Create(ctx, more), deny("more", nsB))

	// Not a platform grant in the same namespace, not another
	// organization's namespace: RBAC keeps each admin in its own, and the
	// webhook refuses a hand-out into a namespace outside the parent.
	platformDenial := func(verb, who string) string {
		return fmt.Sprintf(`%s/platform is a platform grant: only the platform's quota admins (who may %s resourcegrants in %s) may %s it; %q may hand out`,
			nsB, verb, quotav1alpha1.DefaultSystemNamespace, verb, who)
	}
	requireForbidden(t, setHandOut(judy, nsB, "platform", to(20)), platformDenial("update", "judy"))
	requireForbidden(t, judy.Delete(ctx, builders.Grant("platform", nsB).Obj()), platformDenial("delete", "judy"))
	requireForbidden(t, ivan.Create(ctx, handOut(nsX, 1)), `User "ivan" cannot create resource "resourcegrants" in API group "quota.miloapis.com" in the namespace "e2e-deleg-x"`)
	requireForbidden(t, mallory.Create(ctx, handOut(nsA, 1)), `User "mallory" cannot create resource "resourcegrants" in API group "quota.miloapis.com" in the namespace "e2e-deleg-a"`)
	testenv.RequireInvalid(t, cluster.Client.Create(ctx, handOut(nsX, 1)), "spec.delegatedFrom.consumerRef",
		`Forbidden: namespace "e2e-deleg-x" does not belong to resourcemanager.miloapis.com/Organization "e2e-deleg" (it has no label resourcemanager.miloapis.com/organization=e2e-deleg): a cap is handed out only to its own namespaces`)

	// Lowering a child below what it uses is admitted; its next create is
	// denied, and the units come back to the cap.
	for i := 1; i <= 3; i++ {
		mustAdmit(t, nsA, fmt.Sprintf("cm-%d", i))
	}
	if err := setHandOut(ivan, nsA, "quota", to(1)); err != nil {
		t.Fatalf("lowering below usage: %v", err)
	}
	nsAConsumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: nsA}
	testenv.Eventually(t, time.Minute, nsA+"'s limit at 1", func() error {
		st, err := getBucket(nsAConsumer, rt)
		if err != nil {
			return err
		}
		if st.Limit != 1 || st.Allocated != 3 {
			return fmt.Errorf("limit %d, allocated %d", st.Limit, st.Allocated)
		}
		return nil
	})
	mustDeny(t, nsA, "cm-4", "requested 1 of "+rt, "available 0 of 1 (allocated 3, reserved 0)")
	waitBucket(t, org, delegationBucket, 5, 0)

	// Deleting a hand-out returns it to the cap: 9 fit again.
	if err := judy.Delete(ctx, handOut(nsB, 0)); err != nil {
		t.Fatal(err)
	}
	waitBucket(t, org, delegationBucket, 1, 0)
	if err := judy.Create(ctx, handOut(nsB, 9)); err != nil {
		t.Fatalf("handing out what the delete returned: %v", err)
	}
	waitBucket(t, org, delegationBucket, 10, 0)

	// 50 raises at once by two admins, one unit each, from 2 handed out:
	// exactly 8 are admitted, and no stored version ever hands out more
	// than 10.
	if err := setHandOut(judy, nsB, "quota", to(1)); err != nil {
		t.Fatal(err)
	}
	waitBucket(t, org, delegationBucket, 2, 0)
	var admitted, denied atomic.Int64
	var wg sync.WaitGroup
	for i := range 50 {
		c, ns := ivan, nsA
		if i%2 == 1 {
			c, ns = judy, nsB
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := setHandOut(c, ns, "quota", func(n int64) int64 { return n + 1 })
			switch {
			case err == nil:
				admitted.Add(1)
			case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "cap exceeded"):
				denied.Add(1)
			default:
				t.Errorf("raise in %s: %v", ns, err)
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 8 || denied.Load() != 42 {
		t.Errorf("admitted %d, denied %d; want 8 and 42", admitted.Load(), denied.Load())
	}
	waitBucket(t, org, delegationBucket, 10, 0)
	testenv.Eventually(t, time.Minute, "the watch at 10", func() error {
		if got := counted.total(); got != 10 {
			return fmt.Errorf("handed out %d", got)
		}
		return nil
	})
	counted.mu.Lock()
	t.Logf("%d stored versions watched, at most %d handed out", counted.events, counted.max)
	counted.mu.Unlock()
}
