package webhooks_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/delegation"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// handOutGrant is a delegated grant of amount core/configmaps from org to
// namespace ns.
func handOutGrant(name, ns, org string, amount int64) *quotav1alpha1.ResourceGrant {
	return builders.Grant(name, ns).Consumer(nsRef(ns)).DelegatedFrom(orgRef(org)).Allowance(rtConfigMaps, amount).Obj()
}

// waitHandedOut waits until org's delegation bucket of core/configmaps
// counts handed out and holds nothing in flight: the denials below quote
// its numbers.
func waitHandedOut(t *testing.T, org string, limit, handedOut int64) {
	t.Helper()
	key := delegation.Key(ledgerconv.Consumer(orgRef(org)), rtConfigMaps)
	testenv.Eventually(t, settle, fmt.Sprintf("%s handed out %d of %d", org, handedOut, limit), func() error {
		b := &quotav1alpha1.AllowanceBucket{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: sysNS, Name: key.Name()}, b); err != nil {
			return err
		}
		if s := b.Status; s.Limit != limit || s.Allocated != handedOut || s.Reserved != 0 {
			return fmt.Errorf("limit %d, allocated %d, reserved %d", s.Limit, s.Allocated, s.Reserved)
		}
		return nil
	})
}

// requireForbidden asserts err is a 403 whose message is want.
func requireForbidden(t *testing.T, err error, want string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Fatalf("want Forbidden %q, got %v", want, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("message:\n got %s\nwant %s", err.Error(), want)
	}
}

// setAmount sets g's first amount as c, on the latest g (the grant
// controller writes its status meanwhile).
func setAmount(t *testing.T, c client.Client, g *quotav1alpha1.ResourceGrant, amount int64) error {
	t.Helper()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(g), g); err != nil {
			t.Fatal(err)
		}
		g.Spec.Allowances[0].Buckets[0].Amount = amount
		return c.Update(ctx, g)
	})
}

func TestDelegatedAllowancesStayWithinTheParentsCap(t *testing.T) {
	needEnv(t)
	const org = "acme-t27"
	newNamespace(t, "t27-a", tenantOf(org))
	newNamespace(t, "t27-b", tenantOf(org))
	newGrant(t, "t27-cap", orgRef(org), builders.Allowance(quotav1alpha1.DelegatedResourceType(rtConfigMaps), 10))

	a, b := handOutGrant("quota", "t27-a", org, 6), handOutGrant("quota", "t27-b", org, 4)
	for _, g := range []*quotav1alpha1.ResourceGrant{a, b} {
		if err := k8s.Create(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	waitHandedOut(t, org, 10, 10)
	deny := func(to string) string {
		return fmt.Sprintf(`resourcegrants.quota.miloapis.com "quota" is forbidden: cap exceeded: Organization %s's cap of core/configmaps is 10, handed out 10 `+
			`(6 to Namespace t27-a (t27-a/quota), 4 to Namespace t27-b (t27-b/quota)), in flight 0, available 0: cannot hand out 1 more to Namespace %s`, org, to)
	}
	// The child's effective grant says which part was handed out, and by
	// whom; each namespace of the organization shows the cap.
	testenv.Eventually(t, settle, "t27-a's effective grant", func() error {
		e := &quotav1alpha1.EffectiveResourceGrant{}
		name := quotav1alpha1.EffectiveResourceGrantName(nsRef("t27-a"), rtConfigMaps)
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: "t27-a", Name: name}, e); err != nil {
			return err
		}
		want := []quotav1alpha1.DelegatedPart{{ConsumerRef: orgRef(org), Amount: 6, Grants: []string{"t27-a/quota"}}}
		if e.Status.TotalLimit != 6 || !equality.Semantic.DeepEqual(e.Status.Delegated, want) {
			return fmt.Errorf("limit %d, delegated %+v", e.Status.TotalLimit, e.Status.Delegated)
		}
		cap := &quotav1alpha1.EffectiveResourceGrant{}
		name = quotav1alpha1.EffectiveResourceGrantName(orgRef(org), quotav1alpha1.DelegatedResourceType(rtConfigMaps))
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: "t27-b", Name: name}, cap); err != nil {
			return err
		}
		if st := cap.Status; st.TotalLimit != 10 || st.TotalAllocated != 10 || st.Available != 0 {
			return fmt.Errorf("cap's effective grant: limit %d, handed out %d, available %d", st.TotalLimit, st.TotalAllocated, st.Available)
		}
		return nil
	})
	requireForbidden(t, setAmount(t, k8s, a, 7), deny("t27-a"))
	requireForbidden(t, setAmount(t, k8s, b, 5), deny("t27-b"))
	// A second grant to the same child is a hand-out too.
	requireForbidden(t, k8s.Create(ctx, handOutGrant("more", "t27-b", org, 1)),
		strings.Replace(deny("t27-b"), `"quota"`, `"more"`, 1))

	// Lowering is admitted whatever is used, and returns what it held.
	if err := setAmount(t, k8s, a, 2); err != nil {
		t.Fatal(err)
	}
	waitHandedOut(t, org, 10, 6)
	if err := setAmount(t, k8s, b, 8); err != nil {
		t.Fatal(err)
	}
	waitHandedOut(t, org, 10, 10)
	// Deleting returns it all.
	if err := k8s.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitHandedOut(t, org, 10, 2)
	if err := setAmount(t, k8s, a, 10); err != nil {
		t.Fatal(err)
	}
	waitHandedOut(t, org, 10, 10)
	// A dry run is judged alike and holds nothing.
	g := handOutGrant("dry", "t27-b", org, 1)
	requireForbidden(t, k8s.Create(ctx, g, client.DryRunAll), strings.Replace(deny("t27-b"), `"quota"`, `"dry"`, 1)[:60])
}

func TestDelegatedGrantsAreRefusedFieldByField(t *testing.T) {
	needEnv(t)
	const org, other = "acme-t27v", "globex-t27v"
	newNamespace(t, "t27v-a", tenantOf(org))
	newNamespace(t, "t27v-other", tenantOf(other))
	newGrant(t, "t27v-cap", orgRef(org), builders.Allowance(quotav1alpha1.DelegatedResourceType(rtConfigMaps), 10))

	dims := builders.Grant("dims", "t27v-a").Consumer(nsRef("t27v-a")).DelegatedFrom(orgRef(org)).
		SelectedAllowance(rtConfigMaps, &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}, 1).Obj()
	cases := []struct {
		name  string
		grant *quotav1alpha1.ResourceGrant
		field string
		want  string
	}{
		{"another organization's namespace", handOutGrant("quota", "t27v-other", org, 1),
			"spec.delegatedFrom.consumerRef", `Forbidden: namespace "t27v-other" does not belong to resourcemanager.miloapis.com/Organization "acme-t27v" ` +
				`(it has no label resourcemanager.miloapis.com/organization=acme-t27v): a cap is handed out only to its own namespaces`},
		{"dimensions", dims, "spec.allowances[0].buckets[0].dimensionSelector",
			"Forbidden: a delegated amount applies to every bucket of its resource type: a parent's cap is handed out without dimensions"},
		{"a cap handed out", builders.Grant("cap", "t27v-a").Consumer(nsRef("t27v-a")).DelegatedFrom(orgRef(org)).
			Allowance(quotav1alpha1.DelegatedResourceType(rtConfigMaps), 1).Obj(),
			"spec.allowances[0].resourceType", "Forbidden: a delegated grant hands out amounts, not caps: only a platform grant gives a cap to hand out"},
		{"a cap of an unregistered type", builders.Grant("cap", sysNS).Consumer(orgRef(org)).
			Allowance("delegated/t27.example.com/none", 1).Obj(),
			"spec.allowances[0].resourceType", `Invalid value: "t27.example.com/none": no ResourceRegistration declares this resource type`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testenv.RequireInvalid(t, k8s.Create(ctx, tc.grant), tc.field, tc.want)
		})
	}

	// The field is immutable: a platform grant cannot be turned into a
	// delegated one (which its namespace's admin could then change).
	platform := newGrant(t, "platform", nsRef("t27v-a"), builders.Allowance(rtConfigMaps, 3))
	platform.Spec.DelegatedFrom = &quotav1alpha1.DelegatedFrom{ConsumerRef: orgRef(org)}
	testenv.RequireInvalid(t, k8s.Update(ctx, platform), "spec.delegatedFrom",
		"Invalid value: spec.delegatedFrom is immutable: a platform grant cannot become a delegated one, nor the other way round")
}

// An organization's admin may write ResourceGrants in its namespaces (RBAC)
// but only delegated ones: a platform grant there is the platform's.
func TestAnOrganizationsAdminCannotTouchAPlatformGrant(t *testing.T) {
	needEnv(t)
	const org, ns = "acme-t27p", "t27p-a"
	newNamespace(t, ns, tenantOf(org))
	newGrant(t, "t27p-cap", orgRef(org), builders.Allowance(quotav1alpha1.DelegatedResourceType(rtConfigMaps), 10))
	platform := newGrant(t, "platform", nsRef(ns), builders.Allowance(rtConfigMaps, 3))
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "grants", Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{quotav1alpha1.GroupVersion.Group}, Resources: []string{"resourcegrants"}, Verbs: []string{"*"},
	}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "grants", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "grants"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "t27p-admin"}}}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	admin := clientAs(t, "t27p-admin", "t27p-admins")
	want := func(verb string) string {
		return fmt.Sprintf(`t27p-a/platform is a platform grant: only the platform's quota admins (who may %s resourcegrants in quotakeeper-system) may %s it; `+
			`"t27p-admin" may hand out its parent's cap with a grant that sets spec.delegatedFrom`, verb, verb)
	}
	requireForbidden(t, setAmount(t, admin, platform, 30), want("update"))
	requireForbidden(t, admin.Delete(ctx, platform), want("delete"))
	requireForbidden(t, admin.Create(ctx, builders.Grant("platform-2", ns).Consumer(nsRef(ns)).Allowance(rtConfigMaps, 3).Obj()),
		strings.Replace(want("create"), "t27p-a/platform ", "t27p-a/platform-2 ", 1))
	// Delegated grants are the admin's to create, raise, lower and delete.
	g := handOutGrant("quota", ns, org, 4)
	if err := admin.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	if err := setAmount(t, admin, g, 9); err != nil {
		t.Fatal(err)
	}
	if err := setAmount(t, admin, g, 1); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(ctx, g); err != nil {
		t.Fatal(err)
	}
	waitHandedOut(t, org, 10, 0)
}

// A hand-out the webhook admitted whose grant never came (a later webhook
// refused it, the client went away) holds its amount until it expires,
// then the delegation controller returns it to the cap.
func TestAHandOutWhoseGrantNeverCameExpires(t *testing.T) {
	needEnv(t)
	const org = "acme-t27e"
	newNamespace(t, "t27e-a", tenantOf(org))
	newGrant(t, "t27e-cap", orgRef(org), builders.Allowance(quotav1alpha1.DelegatedResourceType(rtConfigMaps), 10))
	if err := k8s.Create(ctx, handOutGrant("quota", "t27e-a", org, 4)); err != nil {
		t.Fatal(err)
	}
	waitHandedOut(t, org, 10, 4)
	key := delegation.Key(ledgerconv.Consumer(orgRef(org)), rtConfigMaps)
	ghostRef := quotav1alpha1.ObjectRef{APIGroup: quotav1alpha1.GroupVersion.Group, Kind: "ResourceGrant", Namespace: "t27e-a", Name: "ghost"}
	reserve := func(r quotav1alpha1.Reservation) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			b := &quotav1alpha1.AllowanceBucket{}
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: sysNS, Name: key.Name()}, b); err != nil {
				return err
			}
			b.Status.Reservations = append(b.Status.Reservations, r)
			b.Status.Reserved += r.Amount
			b.Status.Available -= r.Amount
			return k8s.Status().Update(ctx, b)
		}); err != nil {
			t.Fatal(err)
		}
	}
	// A create's, once it has expired.
	reserve(quotav1alpha1.Reservation{ID: "0b6f3c2e-0000-4000-8000-000000000027", Amount: 3,
		ExpiresAt: metav1.NewMicroTime(time.Now().Add(-time.Minute)), Object: ghostRef})
	waitHandedOut(t, org, 10, 4)
	// An update's of a grant that is gone, at once: it can never land.
	reserve(quotav1alpha1.Reservation{ID: "0b6f3c2e-0000-4000-8000-000000000027/2/delegated", Amount: 2,
		ExpiresAt: metav1.NewMicroTime(time.Now().Add(time.Hour)), Object: ghostRef})
	waitHandedOut(t, org, 10, 4)
}
