package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the commands' output")

// The suite's control plane, and kubeconfig files for an administrator and
// for a tenant who may only view namespace team-a.
var (
	env                    *testenv.Env
	adminConfig, tenantCfg string
	cacheDir               string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping kubectl-quota suite in -short mode: it needs a control plane")
		os.Exit(0)
	}
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	dir, err := os.MkdirTemp("", "kubectl-quota")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// kubectl caches discovery under ~/.kube/cache; tests keep theirs apart.
	cacheDir = filepath.Join(dir, "cache")
	if adminConfig, err = writeKubeconfig(dir, "admin", "system:masters"); err == nil {
		tenantCfg, err = writeKubeconfig(dir, "tenant")
	}
	if err == nil {
		err = seed(context.Background(), env.Client)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func writeKubeconfig(dir, user string, groups ...string) (string, error) {
	data, err := env.Kubeconfig(user, groups...)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, user+".kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

var (
	acme     = quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}
	teamA    = quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-a"}
	teamB    = quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-b"}
	dfw      = map[string]string{"region": "dfw"}
	orgLabel = quotav1alpha1.ConsumerLabelKey(acme.APIGroup, acme.Kind)
	cmType   = "core/configmaps"
	cpuType  = "compute.example.com/cpu"
	systemNS = quotav1alpha1.DefaultSystemNamespace
	webUID   string // the uid of configmap team-a/web, which two views describe
)

// seed writes what the manager would have: registrations (cpu with display
// units), buckets with their status, the effective grants of team-a and
// team-b, and the views of configmap team-a/web. Nothing runs but the
// apiserver, so every figure is exactly what is written here.
func seed(ctx context.Context, c client.Client) error {
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: systemNS}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{orgLabel: "acme"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Labels: map[string]string{orgLabel: "acme"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-c"}},
	} {
		if err := c.Create(ctx, ns); err != nil {
			return err
		}
	}
	regs := []*quotav1alpha1.ResourceRegistration{
		registration("configmaps", cmType, "configmaps", "", 1, quotav1alpha1.GroupKind{Kind: "ConfigMap"}),
		registration("cpu", cpuType, "millicores", "cores", 1000, quotav1alpha1.GroupKind{APIGroup: "apps", Kind: "Deployment"}),
	}
	units := map[string]quotav1alpha1.Units{}
	for _, r := range regs {
		units[r.Spec.ResourceType] = quotav1alpha1.UnitsOf(r)
		if err := c.Create(ctx, r); err != nil {
			return err
		}
		meta.SetStatusCondition(&r.Status.Conditions, metav1.Condition{Type: quotav1alpha1.ConditionActive, Status: metav1.ConditionTrue, Reason: quotav1alpha1.ReasonRegistrationActive})
		if err := c.Status().Update(ctx, r); err != nil {
			return err
		}
	}

	buckets := []*quotav1alpha1.AllowanceBucket{
		bucket(teamA, cmType, nil, quotav1alpha1.AllowanceBucketStatus{Limit: 5, Allocated: 3, Available: 2,
			Namespaces: []quotav1alpha1.NamespaceUsage{{Namespace: "team-a", Allocated: 3}}}),
		bucket(teamB, cmType, nil, quotav1alpha1.AllowanceBucketStatus{Limit: 4, Allocated: 4,
			Namespaces: []quotav1alpha1.NamespaceUsage{{Namespace: "team-b", Allocated: 4}}}),
		bucket(acme, cmType, nil, quotav1alpha1.AllowanceBucketStatus{Limit: 8, Allocated: 7, Reserved: 1,
			Namespaces: []quotav1alpha1.NamespaceUsage{{Namespace: "team-a", Allocated: 3}, {Namespace: "team-b", Allocated: 4}}}),
		bucket(acme, cpuType, dfw, quotav1alpha1.AllowanceBucketStatus{Limit: 8000, Allocated: 2500, Reserved: 750, Available: 4750,
			Namespaces: []quotav1alpha1.NamespaceUsage{{Namespace: "team-a", Allocated: 2000}, {Namespace: "team-b", Allocated: 500}}}),
	}
	for _, b := range buckets {
		st := b.Status
		if err := c.Create(ctx, b); err != nil {
			return err
		}
		b.Status = st
		if err := c.Status().Update(ctx, b); err != nil {
			return err
		}
	}

	// The effective controller's grants: team-a and team-b each see their
	// own namespace's bucket and acme's two.
	for _, ns := range []string{"team-a", "team-b"} {
		own := buckets[0]
		if ns == "team-b" {
			own = buckets[1]
		}
		for i, group := range [][]*quotav1alpha1.AllowanceBucket{{own}, {buckets[2]}, {buckets[3]}} {
			if err := effectiveGrant(ctx, c, ns, fmt.Sprintf("grant-%d", i), units[group[0].Spec.ResourceType], group); err != nil {
				return err
			}
		}
	}

	// configmap team-a/web counts against team-a (one configmap) and acme
	// (one configmap, and 0.5 cores in dfw); a view of an earlier object of
	// the same name (another uid) is not web's. configmap team-a/idle counts
	// nothing.
	web := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"}}
	idle := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "idle", Namespace: "team-a"}}
	for _, o := range []client.Object{web, idle} {
		if err := c.Create(ctx, o); err != nil {
			return err
		}
	}
	webUID = string(web.UID)
	views := []*quotav1alpha1.ResourceClaim{
		view(web, "web-1f0c", string(web.UID), teamA, quotav1alpha1.ResourceRequest{ResourceType: cmType, Amount: 1}),
		view(web, "web-8a21", string(web.UID), acme,
			quotav1alpha1.ResourceRequest{ResourceType: cmType, Amount: 1},
			quotav1alpha1.ResourceRequest{ResourceType: cpuType, Amount: 500, Dimensions: dfw}),
		view(web, "web-old", "0d9d5bde-0000-4000-8000-000000000000", teamA, quotav1alpha1.ResourceRequest{ResourceType: cmType, Amount: 1}),
	}
	for _, v := range views {
		if err := c.Create(ctx, v); err != nil {
			return err
		}
	}

	if err := seedDelegation(ctx, c, units[cmType]); err != nil {
		return err
	}

	// The tenant holds what quotakeeper-quota-viewer gives (aggregated into
	// `view`) in team-a, and nothing else: not the registrations, not the
	// system namespace's buckets.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "quota-viewer", Namespace: "team-a"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{quotav1alpha1.GroupVersion.Group}, Resources: []string{"effectiveresourcegrants", "resourceclaims", "allowancebuckets"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: "team-a"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// seedDelegation writes a cap of 10 configmaps that Organization initech
// may hand out, 6 handed to team-d (which also has 2 of the platform's)
// and 3 to team-e, with 1 in flight; and their buckets and effective grants.
func seedDelegation(ctx context.Context, c client.Client, units quotav1alpha1.Units) error {
	initech := quotav1alpha1.ConsumerRef{APIGroup: acme.APIGroup, Kind: acme.Kind, Name: "initech"}
	teamD, teamE := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-d"}, quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-e"}
	for _, ns := range []string{"team-d", "team-e"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{orgLabel: "initech"}}}); err != nil {
			return err
		}
	}
	capBucket := bucket(initech, quotav1alpha1.DelegatedResourceType(cmType), nil, quotav1alpha1.AllowanceBucketStatus{Limit: 10, Allocated: 9, Reserved: 1,
		Namespaces: []quotav1alpha1.NamespaceUsage{{Namespace: "team-d", Allocated: 6}, {Namespace: "team-e", Allocated: 3}}})
	dBucket := bucket(teamD, cmType, nil, quotav1alpha1.AllowanceBucketStatus{Limit: 8, Allocated: 7, Available: 1,
		Namespaces: []quotav1alpha1.NamespaceUsage{{Namespace: "team-d", Allocated: 7}}})
	eBucket := bucket(teamE, cmType, nil, quotav1alpha1.AllowanceBucketStatus{Limit: 3, Allocated: 1, Available: 2,
		Namespaces: []quotav1alpha1.NamespaceUsage{{Namespace: "team-e", Allocated: 1}}})
	for _, b := range []*quotav1alpha1.AllowanceBucket{capBucket, dBucket, eBucket} {
		st := b.Status
		if err := c.Create(ctx, b); err != nil {
			return err
		}
		b.Status = st
		if err := c.Status().Update(ctx, b); err != nil {
			return err
		}
	}
	for _, g := range []*quotav1alpha1.ResourceGrant{
		builders.Grant("quota", "team-d").Consumer(teamD).DelegatedFrom(initech).Allowance(cmType, 6).Obj(),
		builders.Grant("platform", "team-d").Consumer(teamD).Allowance(cmType, 2).Obj(),
		builders.Grant("quota", "team-e").Consumer(teamE).DelegatedFrom(initech).Allowance(cmType, 3).Obj(),
	} {
		if err := c.Create(ctx, g); err != nil {
			return err
		}
	}
	for ns, own := range map[string]*quotav1alpha1.AllowanceBucket{"team-d": dBucket, "team-e": eBucket} {
		if err := effectiveGrant(ctx, c, ns, "own", units, []*quotav1alpha1.AllowanceBucket{own}); err != nil {
			return err
		}
		if err := effectiveGrant(ctx, c, ns, "cap", units, []*quotav1alpha1.AllowanceBucket{capBucket}); err != nil {
			return err
		}
	}
	return nil
}

func registration(name, resourceType, base, display string, factor int64, claiming quotav1alpha1.GroupKind) *quotav1alpha1.ResourceRegistration {
	return builders.Registration(name, resourceType).Consumer(quotav1alpha1.ConsumerTypeRef{APIGroup: acme.APIGroup, Kind: acme.Kind}).
		Type(quotav1alpha1.RegistrationTypeEntity).BaseUnit(base).DisplayUnit(display, factor).ClaimingResources(claiming).Obj()
}

func bucketKey(c quotav1alpha1.ConsumerRef, resourceType string, dims map[string]string) ledger.BucketKey {
	return ledger.NewBucketKey(ledger.Consumer{APIGroup: c.APIGroup, Kind: c.Kind, Name: c.Name, Namespace: c.Namespace}, resourceType, dims)
}

func bucket(c quotav1alpha1.ConsumerRef, resourceType string, dims map[string]string, st quotav1alpha1.AllowanceBucketStatus) *quotav1alpha1.AllowanceBucket {
	b := builders.Bucket(bucketKey(c, resourceType, dims).Name(), quotav1alpha1.BucketNamespace(c, systemNS)).
		Of(c, resourceType).Dimensions(dims).Obj()
	b.Status = st
	return b
}

func effectiveGrant(ctx context.Context, c client.Client, ns, name string, units quotav1alpha1.Units, buckets []*quotav1alpha1.AllowanceBucket) error {
	first := buckets[0]
	w := builders.EffectiveGrant(name, ns, first.Spec.ConsumerRef, first.Spec.ResourceType).Units(units)
	for _, b := range buckets {
		w.Bucket(b)
	}
	e := w.Obj()
	st := e.Status
	if err := c.Create(ctx, e); err != nil {
		return err
	}
	e.Status = st
	return c.Status().Update(ctx, e)
}

// view is a ResourceClaim view as the observer writes it: labelled, owned by
// the object, spec.resourceRef naming it.
func view(obj *corev1.ConfigMap, name, uid string, c quotav1alpha1.ConsumerRef, reqs ...quotav1alpha1.ResourceRequest) *quotav1alpha1.ResourceClaim {
	return builders.Claim(name, obj.Namespace).View().
		OwnedBy(metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: obj.Name, UID: obj.UID}).
		Consumer(c).Requests(reqs...).
		For(quotav1alpha1.ObjectRef{Kind: "ConfigMap", Namespace: obj.Namespace, Name: obj.Name, UID: uid}).Obj()
}

// TestCommands runs each command in-process against the apiserver, as kubectl
// would run the plugin, and compares what it prints (stdout, stderr and the
// exit code) with testdata/<name>.golden.
func TestCommands(t *testing.T) {
	for _, tc := range []struct {
		golden     string
		kubeconfig *string
		args       []string
	}{
		{"usage-namespace", &adminConfig, []string{"usage", "-n", "team-a"}},
		{"usage-all", &adminConfig, []string{"usage", "-A"}},
		{"usage-wide", &adminConfig, []string{"usage", "-A", "-o", "wide"}},
		{"usage-json", &adminConfig, []string{"usage", "-n", "team-a", "-o", "json"}},
		{"usage-empty", &adminConfig, []string{"usage", "-n", "team-c"}},
		{"usage-tenant", &tenantCfg, []string{"usage", "-n", "team-a", "-o", "wide"}},
		{"explain-two-views", &adminConfig, []string{"explain", "configmap/web", "-n", "team-a"}},
		{"explain-wide", &adminConfig, []string{"explain", "cm", "web", "-n", "team-a", "-o", "wide"}},
		{"explain-yaml", &adminConfig, []string{"explain", "ConfigMap/web", "-n", "team-a", "-o", "yaml"}},
		{"explain-tenant", &tenantCfg, []string{"explain", "configmaps/web", "-n", "team-a"}},
		{"explain-nothing", &adminConfig, []string{"explain", "configmap/idle", "-n", "team-a"}},
		{"explain-not-found", &adminConfig, []string{"explain", "configmap/missing", "-n", "team-a"}},
		{"explain-unknown-type", &adminConfig, []string{"explain", "widgets/web", "-n", "team-a"}},
		{"bad-output", &adminConfig, []string{"usage", "-o", "name"}},
		{"delegations-all", &adminConfig, []string{"delegations", "-A"}},
		{"delegations-wide", &adminConfig, []string{"delegations", "-A", "-o", "wide"}},
		{"delegations-namespace", &adminConfig, []string{"delegations", "-n", "team-d"}},
		{"delegations-json", &adminConfig, []string{"delegations", "-n", "team-e", "-o", "json"}},
		{"delegations-none", &adminConfig, []string{"delegations", "-n", "team-a"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"--kubeconfig", *tc.kubeconfig, "--cache-dir", cacheDir}, tc.args...)
			code := run(context.Background(), args, &stdout, &stderr)
			got := transcript(tc.args, stdout.String(), stderr.String(), code)
			compareGolden(t, filepath.Join("testdata", tc.golden+".golden"), got)
		})
	}
}

// transcript is what a terminal would show, with the uid of the only
// object whose uid the apiserver chose replaced, so the golden files are
// stable.
func transcript(args []string, stdout, stderr string, code int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "$ kubectl quota %s\n%s", strings.Join(args, " "), stdout)
	if stderr != "" {
		fmt.Fprintf(&b, "--- stderr\n%s", stderr)
	}
	if code != 0 {
		fmt.Fprintf(&b, "--- exit %d\n", code)
	}
	return strings.ReplaceAll(b.String(), webUID, "<uid of web>")
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (rewrite with -update if the change is intended)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
