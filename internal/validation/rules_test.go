package validation

import (
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

const (
	sysNS      = "quotakeeper-system"
	rtProjects = "resourcemanager.miloapis.com/projects"
	rtCPU      = "compute.miloapis.com/cpu"
)

var org = quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}

func reg(name, rt string, state string, dims ...string) quotav1alpha1.ResourceRegistration {
	r := builders.Registration(name, rt).Generation(2).
		Consumer(quotav1alpha1.ConsumerTypeRef{APIGroup: org.APIGroup, Kind: org.Kind}).Dimensions(dims...)
	switch state {
	case "active":
		r.Condition("Active", metav1.ConditionTrue, 2, "")
	case "refused":
		r.Condition("Active", metav1.ConditionFalse, 2, "already registered by first")
	case "stale":
		r.Condition("Active", metav1.ConditionTrue, 1, "")
	case "deleting":
		r.Condition("Active", metav1.ConditionTrue, 2, "").Deleting(time.Unix(1, 0))
	}
	return *r.Obj()
}

// orgGrant starts org's grant "g" in ns.
func orgGrant(ns string) *builders.GrantWrapper { return builders.Grant("g", ns).Consumer(org) }

// errorsOf renders a verdict's errors one per line, as the API would.
func errorsOf(v Verdict) string {
	var out []string
	for _, e := range v.Errors {
		out = append(out, e.Error())
	}
	return strings.Join(out, "\n")
}

func TestCatalogPrefersActiveThenPending(t *testing.T) {
	cat := NewCatalog([]quotav1alpha1.ResourceRegistration{
		reg("b-refused", rtProjects, "refused"), reg("a-active", rtProjects, "active"),
		reg("pending", rtCPU, "stale"), reg("gone", rtCPU, "deleting"),
		reg("only-deleting", "x/deleting", "deleting"),
	})
	for _, tc := range []struct {
		rt    string
		name  string
		state State
	}{
		{rtProjects, "a-active", Active},
		{rtCPU, "pending", Pending},
		{"x/deleting", "only-deleting", Inactive},
		{"x/unknown", "", Unregistered},
	} {
		r, state := cat.Lookup(tc.rt)
		name := ""
		if r != nil {
			name = r.Name
		}
		if name != tc.name || state != tc.state {
			t.Errorf("Lookup(%s) = %q, %v; want %q, %v", tc.rt, name, state, tc.name, tc.state)
		}
	}
}

func TestOfflineCatalogCountsUnjudgedRegistrationsAsActive(t *testing.T) {
	cat := NewOfflineCatalog([]quotav1alpha1.ResourceRegistration{
		reg("new", rtProjects, ""), reg("refused", rtCPU, "refused"), reg("gone", "x/deleting", "deleting"),
	})
	for _, tc := range []struct {
		rt    string
		state State
	}{
		{rtProjects, Active},
		{rtCPU, Inactive},
		{"x/deleting", Inactive},
		{"x/unknown", Unregistered},
	} {
		if _, state := cat.Lookup(tc.rt); state != tc.state {
			t.Errorf("Lookup(%s) = %v, want %v", tc.rt, state, tc.state)
		}
	}
}

func TestValidateGrant(t *testing.T) {
	cat := NewCatalog([]quotav1alpha1.ResourceRegistration{
		reg("projects", rtProjects, "active"),
		reg("cpu", rtCPU, "active", "region"),
		reg("deleting", "x/deleting", "deleting"),
		reg("new", "x/new", ""),
	})
	region := func(key string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{key: "dfw"}}
	}
	cases := []struct {
		name    string
		grant   *quotav1alpha1.ResourceGrant
		want    string
		pending string
	}{
		{"valid", orgGrant(sysNS).Allowance(rtProjects, 3).SelectedAllowance(rtCPU, region("region"), 4000).Obj(), "", ""},
		{"wrong namespace", orgGrant("team-a").Allowance(rtProjects, 3).Obj(),
			`metadata.namespace: Invalid value: "team-a": grants for resourcemanager.miloapis.com/Organization "acme" live in namespace "quotakeeper-system", with its buckets`, ""},
		{"unknown resource type", orgGrant(sysNS).Allowance("x/unknown", 1).Obj(),
			`spec.allowances[0].resourceType: Invalid value: "x/unknown": no ResourceRegistration declares this resource type`, ""},
		{"inactive resource type", orgGrant(sysNS).Allowance("x/deleting", 1).Obj(),
			`spec.allowances[0].resourceType: Invalid value: "x/deleting": ResourceRegistration "deleting" for this resource type is not active: it is being deleted`, ""},
		{"pending registration", orgGrant(sysNS).Allowance("x/new", 1).Obj(), "",
			`spec.allowances[0].resourceType: ResourceRegistration "new" for "x/new" has not been judged active yet`},
		{"undeclared matchLabels key", orgGrant(sysNS).SelectedAllowance(rtCPU, region("zone"), 1).Obj(),
			`spec.allowances[0].buckets[0].dimensionSelector.matchLabels[zone]: Invalid value: "zone": dimension "zone" is not declared by ResourceRegistration "cpu" (it declares region)`, ""},
		{"undeclared expression key", orgGrant(sysNS).SelectedAllowance(rtProjects, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpExists}}}, 1).Obj(),
			`spec.allowances[0].buckets[0].dimensionSelector.matchExpressions[0].key: Invalid value: "tier": dimension "tier" is not declared by ResourceRegistration "projects" (it declares none)`, ""},
		{"malformed selector", orgGrant(sysNS).SelectedAllowance(rtCPU, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "region", Operator: metav1.LabelSelectorOpIn}}}, 1).Obj(),
			"spec.allowances[0].buckets[0].dimensionSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'", ""},
		{"overflow", orgGrant(sysNS).Allowance(rtProjects, math.MaxInt64, 1, 1).Obj(),
			`spec.allowances[0].buckets[1].amount: Invalid value: 1: the amounts of resourcemanager.miloapis.com/projects in this grant sum past the int64 maximum 9223372036854775807`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := ValidateGrant(tc.grant, cat, sysNS)
			if got := errorsOf(v); got != tc.want {
				t.Errorf("errors:\n got %s\nwant %s", got, tc.want)
			}
			if got := strings.Join(v.Pending, "\n"); got != tc.pending {
				t.Errorf("pending:\n got %s\nwant %s", got, tc.pending)
			}
		})
	}
}

func TestValidateGrantConsumerKind(t *testing.T) {
	cat := NewCatalog([]quotav1alpha1.ResourceRegistration{reg("projects", rtProjects, "active")})
	g := orgGrant("team-a").Allowance(rtProjects, 1).Obj()
	g.Spec.ConsumerRef = quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-a"}
	want := `spec.consumerRef: Invalid value: "Namespace": resource type "resourcemanager.miloapis.com/projects" is consumed by resourcemanager.miloapis.com/Organization (ResourceRegistration "projects")`
	if got := errorsOf(ValidateGrant(g, cat, sysNS)); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func TestValidateGrantTotals(t *testing.T) {
	g := orgGrant(sysNS).Allowance(rtProjects, 10).Allowance(rtCPU, 1).Obj()
	g.Name = "new"
	other := *orgGrant(sysNS).Allowance(rtProjects, math.MaxInt64-5).Obj()
	other.Name = "big"
	self := *orgGrant(sysNS).Allowance(rtProjects, math.MaxInt64).Obj()
	self.Name = "new" // the stored version of the grant being updated does not count
	foreign := *orgGrant(sysNS).Allowance(rtProjects, math.MaxInt64).Obj()
	foreign.Name, foreign.Spec.ConsumerRef.Name = "foreign", "other-org"

	errs := ValidateGrantTotals(g, []quotav1alpha1.ResourceGrant{self, foreign, other})
	want := `spec.allowances[0]: Invalid value: "resourcemanager.miloapis.com/projects": with the other grants for resourcemanager.miloapis.com/Organization "acme" (such as "big"), the amounts of resourcemanager.miloapis.com/projects sum past the int64 maximum 9223372036854775807`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("got %v\nwant %s", errs, want)
	}
	if errs := ValidateGrantTotals(g, []quotav1alpha1.ResourceGrant{self, foreign}); len(errs) != 0 {
		t.Fatalf("grants of another consumer, or the grant itself, counted: %v", errs)
	}
}

func TestValidateClaim(t *testing.T) {
	cat := NewCatalog([]quotav1alpha1.ResourceRegistration{reg("cpu", rtCPU, "active", "region")})
	claim := func(ns string, c quotav1alpha1.ConsumerRef, dims map[string]string) *quotav1alpha1.ResourceClaim {
		return builders.Claim("c", ns).Consumer(c).Request(rtCPU, 1, dims).Obj()
	}
	labelled := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a",
		Labels: map[string]string{"resourcemanager.miloapis.com/organization": "acme"}}}
	bare := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}
	cases := []struct {
		name  string
		claim *quotav1alpha1.ResourceClaim
		ns    *corev1.Namespace
		want  string
	}{
		{"labelled namespace", claim("team-a", org, map[string]string{"region": "dfw"}), labelled, ""},
		{"system namespace holds the consumer's buckets", claim(sysNS, org, nil), nil, ""},
		{"namespace without the label", claim("team-b", org, nil), bare,
			`spec.consumerRef: Forbidden: namespace "team-b" does not belong to resourcemanager.miloapis.com/Organization "acme": it needs the label resourcemanager.miloapis.com/organization=acme`},
		{"another namespace's quota", claim("team-b", quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-a"}, nil), bare,
			`spec.consumerRef: Forbidden: a claim in namespace "team-b" may not claim the quota of namespace "team-a"` + "\n" +
				`spec.consumerRef: Invalid value: "Namespace": resource type "compute.miloapis.com/cpu" is consumed by resourcemanager.miloapis.com/Organization (ResourceRegistration "cpu")`},
		{"undeclared dimension", claim("team-a", org, map[string]string{"zone": "a"}), labelled,
			`spec.requests[0].dimensions[zone]: Invalid value: "zone": dimension "zone" is not declared by ResourceRegistration "cpu" (it declares region)`},
		{"bad dimension value", claim("team-a", org, map[string]string{"region": "not ok"}), labelled,
			`spec.requests[0].dimensions[region]: Invalid value: "not ok": dimension values are label values: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := errorsOf(ValidateClaim(tc.claim, cat, tc.ns, sysNS)); got != tc.want {
				t.Errorf("errors:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestValidateRegistration(t *testing.T) {
	r := reg("r", rtCPU, "", "region", "not a key!")
	errs := ValidateRegistration(&r)
	want := `spec.dimensions[1]: Invalid value: "not a key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("got %v\nwant %s", errs, want)
	}
}

func TestARegistrationCannotTakeTheNameOfACapToHandOut(t *testing.T) {
	r := reg("r", "delegated/core/configmaps", "")
	errs := ValidateRegistration(&r)
	want := `spec.resourceType: Invalid value: "delegated/core/configmaps": the prefix "delegated/" names the buckets that count a parent's hand-outs; a registered resource type cannot use it`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("got %v\nwant %s", errs, want)
	}
}

func TestValidatePolicyResourceType(t *testing.T) {
	cat := NewCatalog([]quotav1alpha1.ResourceRegistration{reg("cpu", rtCPU, "active"), reg("new", "x/new", "")})
	path := field.NewPath("spec", "target", "resourceGrantTemplate", "spec", "allowances").Index(0).Child("resourceType")
	cpath := field.NewPath("spec", "target", "resourceGrantTemplate", "spec", "consumerRef")
	ns := &quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"}
	orgType := &quotav1alpha1.ConsumerTypeRef{APIGroup: org.APIGroup, Kind: org.Kind}
	cases := []struct {
		name     string
		rt       string
		consumer *quotav1alpha1.ConsumerTypeRef
		want     string
		pending  string
	}{
		{"registered for the consumer kind", rtCPU, orgType, "", ""},
		{"the template computes the consumer kind", rtCPU, nil, "", ""},
		{"another consumer kind", rtCPU, ns,
			`spec.target.resourceGrantTemplate.spec.consumerRef: Invalid value: "Namespace": resource type "compute.miloapis.com/cpu" is consumed by resourcemanager.miloapis.com/Organization (ResourceRegistration "cpu")`, ""},
		{"unregistered", "x/unknown", orgType,
			`spec.target.resourceGrantTemplate.spec.allowances[0].resourceType: Invalid value: "x/unknown": no ResourceRegistration declares this resource type`, ""},
		{"not judged yet", "x/new", orgType, "",
			`spec.target.resourceGrantTemplate.spec.allowances[0].resourceType: ResourceRegistration "new" for "x/new" has not been judged active yet`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := ValidatePolicyResourceType(cat, tc.rt, path, tc.consumer, cpath)
			if got := errorsOf(v); got != tc.want {
				t.Errorf("errors:\n got %s\nwant %s", got, tc.want)
			}
			if got := strings.Join(v.Pending, "\n"); got != tc.pending {
				t.Errorf("pending:\n got %s\nwant %s", got, tc.pending)
			}
		})
	}
}

func TestRegistrationConsumerLabelOutsideKubernetesDomains(t *testing.T) {
	cases := []struct {
		group, kind, want string
	}{
		{"resourcemanager.miloapis.com", "Organization", ""},
		{"", "Namespace", ""},
		{"apps", "Deployment", ""},
		{"rbac.authorization.k8s.io", "Group", `spec.consumerTypeRef.apiGroup: Invalid value: "rbac.authorization.k8s.io": the consumer label rbac.authorization.k8s.io/group would lie in a domain Kubernetes reserves (kubernetes.io, k8s.io), which the namespace guard does not see; a consumer kind needs an API group of its own`},
		{"example.kubernetes.io", "Team", `spec.consumerTypeRef.apiGroup: Invalid value: "example.kubernetes.io": the consumer label example.kubernetes.io/team would lie in a domain Kubernetes reserves (kubernetes.io, k8s.io), which the namespace guard does not see; a consumer kind needs an API group of its own`},
	}
	for _, tc := range cases {
		r := reg("r", rtCPU, "")
		r.Spec.ConsumerTypeRef = quotav1alpha1.ConsumerTypeRef{APIGroup: tc.group, Kind: tc.kind}
		if got := errorsOf(Verdict{Errors: ValidateRegistration(&r)}); got != tc.want {
			t.Errorf("%s/%s:\n got %s\nwant %s", tc.group, tc.kind, got, tc.want)
		}
	}
}
