package celpolicy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/celpolicy"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

var ctx = context.Background()

func readPolicy(t *testing.T, file string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatal(err)
	}
}

func errorLines(errs field.ErrorList) string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return strings.Join(out, "\n")
}

// organization is a trigger as a controller reads it (unstructured).
func organization(name, phase string) map[string]any {
	obj := map[string]any{
		"apiVersion": "resourcemanager.miloapis.com/v1alpha1",
		"kind":       "Organization",
		"metadata":   map[string]any{"name": name, "labels": map[string]any{"tier": "gold"}},
	}
	if phase != "" {
		obj["status"] = map[string]any{"phase": phase}
	}
	return obj
}

func TestSeedGrantPolicyRenders(t *testing.T) {
	var p quotav1alpha1.GrantCreationPolicy
	readPolicy(t, "seed-002-grant-policy.yaml", &p)
	g, errs := celpolicy.CompileGrantPolicy(&p)
	if len(errs) > 0 {
		t.Fatalf("seed 002's grant policy does not compile:\n%s", errorLines(errs))
	}
	if got := g.Trigger().String(); got != "resourcemanager.miloapis.com/v1alpha1, Kind=Organization" {
		t.Errorf("trigger %s", got)
	}
	if diff := cmp.Diff([]string{"resourcemanager.miloapis.com/projects"}, g.ResourceTypes()); diff != "" {
		t.Errorf("resource types (-want +got):\n%s", diff)
	}

	res, err := g.Render(ctx, organization("acme-corp", "Active"))
	if err != nil {
		t.Fatal(err)
	}
	want := builders.Grant("", "").
		Consumer(quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme-corp"}).
		Allowance("resourcemanager.miloapis.com/projects", 50).Obj()
	if diff := cmp.Diff(celpolicy.GrantResult{Applies: true, Grant: want}, res); diff != "" {
		t.Errorf("rendered (-want +got):\n%s", diff)
	}

	// The condition does not hold: no grant.
	if res, err := g.Render(ctx, organization("acme-corp", "Pending")); err != nil || res.Applies || res.Grant != nil {
		t.Errorf("Pending organization: %+v, %v", res, err)
	}
	// The condition reads a field the trigger lacks: an error, with the field.
	_, err = g.Render(ctx, organization("acme-corp", ""))
	if want := `spec.trigger.conditions[0].expression: Invalid value: "object.status.phase == \"Active\"": evaluation failed: no such key: status`; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// Seed 002's claim example names '{{.parentOrg}}', which no variable holds.
func TestSeedClaimPolicyNamesNoSuchVariable(t *testing.T) {
	var p quotav1alpha1.ClaimCreationPolicy
	readPolicy(t, "seed-002-claim-policy.yaml", &p)
	_, errs := celpolicy.CompileClaimPolicy(&p)
	want := `spec.target.resourceClaimTemplate.spec.consumerRef.name: Invalid value: "{{.parentOrg}}": compilation failed in {{.parentOrg}}: 1:1: undeclared reference to 'parentOrg' (in container '')`
	if got := errorLines(errs); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	p.Spec.Target.ResourceClaimTemplate.Spec.ConsumerRef.Name = "{{.trigger.metadata.labels['organization']}}"
	if _, errs := celpolicy.CompileClaimPolicy(&p); len(errs) > 0 {
		t.Fatalf("with a variable it names:\n%s", errorLines(errs))
	}
}

// grantPolicy is a valid GrantCreationPolicy to break one field at a time.
func grantPolicy() *quotav1alpha1.GrantCreationPolicy {
	return &quotav1alpha1.GrantCreationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: quotav1alpha1.GrantCreationPolicySpec{
			Trigger: quotav1alpha1.PolicyTrigger{
				Resource:   quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "Namespace"},
				Conditions: []quotav1alpha1.TriggerCondition{{Expression: "has(trigger.metadata.labels)"}, {Expression: "true"}},
			},
			Target: quotav1alpha1.GrantTarget{ResourceGrantTemplate: quotav1alpha1.ResourceGrantTemplate{
				Metadata: quotav1alpha1.ObjectMetaTemplate{Name: "quota-{{trigger.metadata.name}}"},
				Spec: quotav1alpha1.ResourceGrantSpecTemplate{
					ConsumerRef: quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: "{{.trigger.metadata.name}}"},
					Allowances: []quotav1alpha1.AllowanceTemplate{{ResourceType: "core/configmaps",
						Buckets: []quotav1alpha1.GrantBucketTemplate{{Amount: intstr.FromInt32(10)}}}},
				},
			}},
		},
	}
}

func TestCompileGrantPolicyErrors(t *testing.T) {
	const tmpl = "spec.target.resourceGrantTemplate."
	cases := []struct {
		name string
		edit func(p *quotav1alpha1.GrantCreationPolicySpec)
		want string
	}{
		{"unknown function", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Trigger.Conditions[1].Expression = "invalid_function()"
		}, `spec.trigger.conditions[1].expression: Invalid value: "invalid_function()": compilation failed: 1:17: undeclared reference to 'invalid_function' (in container '')`},
		{"wrong result type", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Trigger.Conditions[1].Expression = "size(trigger.metadata.name)"
		}, `spec.trigger.conditions[1].expression: Invalid value: "size(trigger.metadata.name)": must evaluate to bool but got int`},
		{"a field of the trigger is dyn", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Trigger.Conditions[0].Expression = "trigger.spec.enabled"
		}, `spec.trigger.conditions[0].expression: Invalid value: "trigger.spec.enabled": must evaluate to bool but got dyn`},
		{"syntax error", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Trigger.Conditions[0].Expression = "1 +"
		}, `spec.trigger.conditions[0].expression: Invalid value: "1 +": compilation failed: 1:4: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}`},
		{"unknown variable: user is a ClaimCreationPolicy's", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Target.ResourceGrantTemplate.Metadata.Annotations = map[string]string{"created-by": "{{ user.username }}"}
		}, tmpl + `metadata.annotations[created-by]: Invalid value: "{{ user.username }}": compilation failed in {{ user.username }}: 1:1: undeclared reference to 'user' (in container '')`},
		{"unknown variable in a condition", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Trigger.Conditions[0].Expression = `requestInfo.operation == "CREATE"`
		}, `spec.trigger.conditions[0].expression: Invalid value: "requestInfo.operation == \"CREATE\"": compilation failed: 1:1: undeclared reference to 'requestInfo' (in container '')`},
		{"template segment of the wrong type", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Target.ResourceGrantTemplate.Metadata.Name = "quota-{{ size(trigger.metadata.name) }}"
		}, tmpl + `metadata.name: Invalid value: "quota-{{ size(trigger.metadata.name) }}": {{ size(trigger.metadata.name) }} must evaluate to string but got int`},
		{"unclosed template", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Target.ResourceGrantTemplate.Spec.ConsumerRef.Name = "{{ trigger.metadata.name"
		}, tmpl + `spec.consumerRef.name: Invalid value: "{{ trigger.metadata.name": {{ is not closed by }}`},
		{"empty template", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Target.ResourceGrantTemplate.Spec.ConsumerRef.Name = "a{{ }}"
		}, tmpl + `spec.consumerRef.name: Invalid value: "a{{ }}": {{ }} holds no expression`},
		{"literal name", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Target.ResourceGrantTemplate.Metadata.Name = "Acme_Corp"
		}, tmpl + `metadata.name: Invalid value: "Acme_Corp": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"label key", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Target.ResourceGrantTemplate.Metadata.Labels = map[string]string{"not a key": "{{ trigger.metadata.name }}"}
		}, tmpl + `metadata.labels[not a key]: Invalid value: "not a key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`},
		{"negative amount", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Target.ResourceGrantTemplate.Spec.Allowances[0].Buckets[0].Amount = intstr.FromInt32(-1)
		}, tmpl + `spec.allowances[0].buckets[0].amount: Invalid value: "-1": must be greater than or equal to 0, got -1`},
		{"amount neither a number nor a quantity", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Target.ResourceGrantTemplate.Spec.Allowances[0].Buckets[0].Amount = intstr.FromString("lots")
		}, tmpl + `spec.allowances[0].buckets[0].amount: Invalid value: "lots": "lots" is not an integer or a quantity such as 10Gi`},
		{"fractional quantity", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Target.ResourceGrantTemplate.Spec.Allowances[0].Buckets[0].Amount = intstr.FromString("1500m")
		}, tmpl + `spec.allowances[0].buckets[0].amount: Invalid value: "1500m": 1500m is not a whole number of base units within int64`},
		{"amount template with text around it", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Target.ResourceGrantTemplate.Spec.Allowances[0].Buckets[0].Amount = intstr.FromString("{{ 1 }}0")
		}, tmpl + `spec.allowances[0].buckets[0].amount: Invalid value: "{{ 1 }}0": an amount template is a single {{ expr }} and nothing else`},
		{"amount template of the wrong type", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Target.ResourceGrantTemplate.Spec.Allowances[0].Buckets[0].Amount = intstr.FromString("{{ 1.5 }}")
		}, tmpl + `spec.allowances[0].buckets[0].amount: Invalid value: "{{ 1.5 }}": {{ 1.5 }} must evaluate to int, string or kubernetes.Quantity but got double`},
		{"parent name expression", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Target.ParentContext = &quotav1alpha1.ParentContext{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", NameExpression: "trigger.metadata.labels.size()"}
		}, `spec.target.parentContext.nameExpression: Invalid value: "trigger.metadata.labels.size()": trigger.metadata.labels.size() must evaluate to string but got int`},
		{"trigger apiVersion", func(p *quotav1alpha1.GrantCreationPolicySpec) {
			p.Trigger.Resource.APIVersion = "a/b/c"
		}, `spec.trigger.resource.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := grantPolicy()
			tc.edit(&p.Spec)
			g, errs := celpolicy.CompileGrantPolicy(p)
			if got := errorLines(errs); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if g != nil {
				t.Errorf("a policy with errors compiled")
			}
		})
	}
	if _, errs := celpolicy.CompileGrantPolicy(grantPolicy()); len(errs) > 0 {
		t.Fatalf("the valid policy:\n%s", errorLines(errs))
	}
}

// claimPolicy renders every field from the input.
func claimPolicy() *quotav1alpha1.ClaimCreationPolicy {
	return &quotav1alpha1.ClaimCreationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps"},
		Spec: quotav1alpha1.ClaimCreationPolicySpec{
			Trigger: quotav1alpha1.PolicyTrigger{
				Resource: quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"},
				Conditions: []quotav1alpha1.TriggerCondition{
					{Expression: `requestInfo.operation == "CREATE"`},
					{Expression: `!user.groups.exists(g, g == "system:masters")`},
				},
			},
			Target: quotav1alpha1.ClaimTarget{ResourceClaimTemplate: quotav1alpha1.ResourceClaimTemplate{
				Metadata: quotav1alpha1.ObjectMetaTemplate{
					Name:        "{{ trigger.metadata.name }}-{{ requestInfo.resource.resource }}",
					Namespace:   "{{.trigger.metadata.namespace}}",
					Labels:      map[string]string{"team": "{{ trigger.metadata.?labels.team.orValue('none') }}"},
					Annotations: map[string]string{"created-by": "{{ user.username }}", "host": "{{ url(trigger.data.endpoint).getHostname() }}"},
				},
				Spec: quotav1alpha1.ResourceClaimSpecTemplate{
					ConsumerRef: quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: "{{.trigger.metadata.namespace}}"},
					Requests: []quotav1alpha1.ResourceRequestTemplate{
						{ResourceType: "core/configmaps", Amount: intstr.FromInt32(1)},
						{ResourceType: "core/configmap-bytes", Amount: intstr.FromString("{{ size(trigger.data.payload) }}"),
							Dimensions: map[string]string{"region": "{{ trigger.metadata.labels['region'].lowerAscii() }}"}},
						{ResourceType: "core/configmap-quantity", Amount: intstr.FromString("{{ quantity(trigger.data.size) }}")},
						{ResourceType: "core/configmap-replicas", Amount: intstr.FromString("{{ trigger.spec.replicas }}")},
						{ResourceType: "core/configmap-string", Amount: intstr.FromString("2k")},
					},
				},
			}},
		},
	}
}

func configMapInput() celpolicy.ClaimInput {
	return celpolicy.ClaimInput{
		Trigger: map[string]any{
			"metadata": map[string]any{"name": "settings", "namespace": "team-a", "labels": map[string]any{"region": "DFW"}},
			"data":     map[string]any{"payload": "12345", "endpoint": "https://api.example.com:8443/v1", "size": "1Ki"},
			// A JSON number decodes as a double.
			"spec": map[string]any{"replicas": float64(3)},
		},
		User:        map[string]any{"username": "alice", "uid": "u-1", "groups": []any{"devs", "system:authenticated"}},
		RequestInfo: map[string]any{"operation": "CREATE", "resource": map[string]any{"group": "", "version": "v1", "resource": "configmaps"}},
	}
}

func TestClaimPolicyRendersFromTriggerUserAndRequest(t *testing.T) {
	c, errs := celpolicy.CompileClaimPolicy(claimPolicy())
	if len(errs) > 0 {
		t.Fatal(errorLines(errs))
	}
	res, err := c.Render(ctx, configMapInput())
	if err != nil {
		t.Fatal(err)
	}
	want := builders.Claim("settings-configmaps", "team-a").
		Labels(map[string]string{"team": "none"}).
		Annotations(map[string]string{"created-by": "alice", "host": "api.example.com"}).
		Consumer(quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-a"}).
		Request("core/configmaps", 1, nil).
		Request("core/configmap-bytes", 5, map[string]string{"region": "dfw"}).
		Request("core/configmap-quantity", 1024, nil).
		Request("core/configmap-replicas", 3, nil).
		Request("core/configmap-string", 2000, nil).Obj()
	if diff := cmp.Diff(celpolicy.ClaimResult{Applies: true, Claim: want}, res); diff != "" {
		t.Errorf("rendered (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"core/configmaps", "core/configmap-bytes", "core/configmap-quantity", "core/configmap-replicas", "core/configmap-string"}, c.ResourceTypes()); diff != "" {
		t.Errorf("resource types (-want +got):\n%s", diff)
	}

	in := configMapInput()
	in.User["groups"] = []any{"system:masters"}
	if res, err := c.Render(ctx, in); err != nil || res.Applies {
		t.Errorf("a condition that does not hold: %+v, %v", res, err)
	}
}

func TestClaimPolicyRenderErrors(t *testing.T) {
	const tmpl = "spec.target.resourceClaimTemplate."
	cases := []struct {
		name string
		edit func(in *celpolicy.ClaimInput)
		want string
	}{
		{"a template segment returns an int", func(in *celpolicy.ClaimInput) {
			in.Trigger["metadata"].(map[string]any)["namespace"] = int64(7)
		}, tmpl + `metadata.namespace: Invalid value: "{{.trigger.metadata.namespace}}": {{.trigger.metadata.namespace}} must evaluate to string but got int`},
		{"the rendered name is no name", func(in *celpolicy.ClaimInput) {
			in.Trigger["metadata"].(map[string]any)["name"] = "Settings"
		}, tmpl + `metadata.name: Invalid value: "Settings-configmaps": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"a missing field", func(in *celpolicy.ClaimInput) {
			delete(in.Trigger["data"].(map[string]any), "payload")
		}, tmpl + `spec.requests[1].amount: Invalid value: "{{ size(trigger.data.payload) }}": evaluation failed: no such key: payload`},
		{"an amount below 1", func(in *celpolicy.ClaimInput) {
			in.Trigger["spec"] = map[string]any{"replicas": int64(0)}
		}, tmpl + `spec.requests[3].amount: Invalid value: "{{ trigger.spec.replicas }}": must be greater than or equal to 1, got 0`},
		{"an amount of the wrong type", func(in *celpolicy.ClaimInput) {
			in.Trigger["spec"] = map[string]any{"replicas": true}
		}, tmpl + `spec.requests[3].amount: Invalid value: "{{ trigger.spec.replicas }}": must evaluate to int, string or kubernetes.Quantity but got bool`},
		{"a fractional amount", func(in *celpolicy.ClaimInput) {
			in.Trigger["spec"] = map[string]any{"replicas": 2.5}
		}, tmpl + `spec.requests[3].amount: Invalid value: "{{ trigger.spec.replicas }}": evaluated to 2.5, not a whole number`},
		{"an empty consumer name", func(in *celpolicy.ClaimInput) {
			in.Trigger["metadata"].(map[string]any)["namespace"] = ""
		}, tmpl + `spec.consumerRef.name: Required value: must not be empty`},
	}
	c, errs := celpolicy.CompileClaimPolicy(claimPolicy())
	if len(errs) > 0 {
		t.Fatal(errorLines(errs))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := configMapInput()
			tc.edit(&in)
			// An empty namespace renders fine (the caller defaults it); the
			// consumer's name may not be empty.
			res, err := c.Render(ctx, in)
			if err == nil || err.Error() != tc.want {
				t.Errorf("got  %v\nwant %s", err, tc.want)
			}
			if res.Claim != nil || res.Applies {
				t.Errorf("a failed render returned %+v", res)
			}
		})
	}
}

func TestCompileClaimPolicyErrors(t *testing.T) {
	p := claimPolicy()
	r := p.Spec.Target.ResourceClaimTemplate.Spec.Requests
	r[0].Amount = intstr.FromInt32(0)
	r[1].Dimensions = map[string]string{"no way": "x"}
	r[2].ResourceType = "{{ 1 }}"
	want := strings.Join([]string{
		`spec.target.resourceClaimTemplate.spec.requests[0].amount: Invalid value: "0": must be greater than or equal to 1, got 0`,
		`spec.target.resourceClaimTemplate.spec.requests[1].dimensions[no way]: Invalid value: "no way": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		`spec.target.resourceClaimTemplate.spec.requests[2].resourceType: Invalid value: "{{ 1 }}": {{ 1 }} must evaluate to string but got int`,
	}, "\n")
	if _, errs := celpolicy.CompileClaimPolicy(p); errorLines(errs) != want {
		t.Fatalf("got\n%s\nwant\n%s", errorLines(errs), want)
	}
}

// object names the trigger in GrantCreationPolicy only.
func TestObjectIsAGrantPolicyVariable(t *testing.T) {
	p := claimPolicy()
	p.Spec.Trigger.Conditions = []quotav1alpha1.TriggerCondition{{Expression: `object.kind == "ConfigMap"`}}
	want := `spec.trigger.conditions[0].expression: Invalid value: "object.kind == \"ConfigMap\"": compilation failed: 1:1: undeclared reference to 'object' (in container '')`
	if _, errs := celpolicy.CompileClaimPolicy(p); errorLines(errs) != want {
		t.Fatalf("got  %s\nwant %s", errorLines(errs), want)
	}
}

func TestGrantPolicyParentName(t *testing.T) {
	p := grantPolicy()
	p.Spec.Target.ParentContext = &quotav1alpha1.ParentContext{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization",
		NameExpression: `trigger.metadata.labels["organization"]`}
	g, errs := celpolicy.CompileGrantPolicy(p)
	if len(errs) > 0 {
		t.Fatal(errorLines(errs))
	}
	if gk, ok := g.Parent(); !ok || gk.String() != "Organization.resourcemanager.miloapis.com" {
		t.Errorf("parent %v %v", gk, ok)
	}
	ns := map[string]any{"metadata": map[string]any{"name": "team-a", "labels": map[string]any{"organization": "acme"}}}
	res, err := g.Render(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if res.ParentName != "acme" || res.Grant.Name != "quota-team-a" || res.Grant.Spec.ConsumerRef.Name != "team-a" {
		t.Errorf("rendered %+v, parent %q", res.Grant, res.ParentName)
	}
	ns["metadata"].(map[string]any)["labels"] = map[string]any{"organization": ""}
	_, err = g.Render(ctx, ns)
	if want := `spec.target.parentContext.nameExpression: Invalid value: "trigger.metadata.labels[\"organization\"]": evaluated to an empty name`; err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

func TestEvaluationIsBoundedByTheCostLimit(t *testing.T) {
	p := grantPolicy()
	p.Spec.Trigger.Conditions[0].Expression = "lists.range(2000).all(i, lists.range(2000).all(j, i + j >= 0))"
	g, errs := celpolicy.CompileGrantPolicy(p)
	if len(errs) > 0 {
		t.Fatal(errorLines(errs))
	}
	_, err := g.Render(ctx, map[string]any{"metadata": map[string]any{"name": "a"}})
	want := `spec.trigger.conditions[0].expression: Invalid value: "lists.range(2000).all(i, lists.range(2000).all(j, i + j >= 0))": evaluation failed: evaluation exceeded the cost limit of 1000000`
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

// The policies docs/policies.md shows compile (seed 002's claim example,
// which it shows refused, is not among them).
func TestDocsExamplesCompile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "policies.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(data), "```yaml\n")
	compiled := 0
	for _, b := range blocks[1:] {
		doc := b[:strings.Index(b, "```")]
		switch {
		case strings.Contains(doc, "kind: GrantCreationPolicy"):
			var p quotav1alpha1.GrantCreationPolicy
			if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
				t.Fatalf("%v in\n%s", err, doc)
			}
			if _, errs := celpolicy.CompileGrantPolicy(&p); len(errs) > 0 {
				t.Errorf("%s:\n%s", p.Name, errorLines(errs))
			}
		case strings.Contains(doc, "kind: ClaimCreationPolicy"):
			var p quotav1alpha1.ClaimCreationPolicy
			if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
				t.Fatalf("%v in\n%s", err, doc)
			}
			if _, errs := celpolicy.CompileClaimPolicy(&p); len(errs) > 0 {
				t.Errorf("%s:\n%s", p.Name, errorLines(errs))
			}
		default:
			continue
		}
		compiled++
	}
	if compiled != 3 {
		t.Errorf("compiled %d policies from the docs, want 3", compiled)
	}
}
