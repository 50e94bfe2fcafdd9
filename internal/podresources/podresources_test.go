package podresources_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/quotakeeper/quotakeeper/internal/podresources"
)

// Each case is a manifest as a tenant writes it and what one of its pods
// holds once the API server has created it (the requests and limits the
// scheduler and in-tree ResourceQuota count). The first four are the ways
// a hand-written sum over containers counted 0 (issue 22, case 2).
func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name     string
		manifest string
		requests map[corev1.ResourceName]string
		limits   map[corev1.ResourceName]string
	}{{
		name: "pod-level resources of a Deployment",
		manifest: `
kind: Deployment
spec:
  template:
    spec:
      resources: {requests: {cpu: "1"}}
      containers: [{name: app}]`,
		requests: map[corev1.ResourceName]string{"cpu": "1"},
	}, {
		name: "limits only: requests default to them",
		manifest: `
kind: StatefulSet
spec:
  template:
    spec:
      containers: [{name: app, resources: {limits: {cpu: "1", memory: 1Gi}}}]`,
		requests: map[corev1.ResourceName]string{"cpu": "1", "memory": "1Gi"},
		limits:   map[corev1.ResourceName]string{"cpu": "1", "memory": "1Gi"},
	}, {
		name: "a regular init container larger than the containers",
		manifest: `
kind: Deployment
spec:
  template:
    spec:
      initContainers: [{name: migrate, resources: {requests: {cpu: "1"}}}]
      containers: [{name: app, resources: {requests: {cpu: 200m}}}, {name: log, resources: {requests: {cpu: 100m}}}]`,
		requests: map[corev1.ResourceName]string{"cpu": "1"},
	}, {
		name: "pod-level limits only: pod requests default to them",
		manifest: `
kind: Deployment
spec:
  template:
    spec:
      resources: {limits: {cpu: "2"}}
      containers: [{name: app}]`,
		requests: map[corev1.ResourceName]string{"cpu": "2"},
		limits:   map[corev1.ResourceName]string{"cpu": "2"},
	}, {
		name: "pod-level limits with container requests: pod requests are the containers'",
		manifest: `
kind: Deployment
spec:
  template:
    spec:
      resources: {limits: {cpu: "2"}}
      containers: [{name: app, resources: {requests: {cpu: 500m}}}]`,
		requests: map[corev1.ResourceName]string{"cpu": "500m"},
		limits:   map[corev1.ResourceName]string{"cpu": "2"},
	}, {
		name: "a native sidecar runs beside the containers and adds to them",
		manifest: `
kind: Job
spec:
  template:
    spec:
      initContainers: [{name: proxy, restartPolicy: Always, resources: {requests: {cpu: 100m}}}]
      containers: [{name: app, resources: {requests: {cpu: 400m}}}]`,
		requests: map[corev1.ResourceName]string{"cpu": "500m"},
	}, {
		name: "a CronJob's job template",
		manifest: `
kind: CronJob
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers: [{name: app, resources: {requests: {memory: 64Mi}}}]`,
		requests: map[corev1.ResourceName]string{"memory": "64Mi"},
	}, {
		name: "a Pod's own spec, with its overhead",
		manifest: `
kind: Pod
spec:
  overhead: {cpu: 50m}
  containers: [{name: app, resources: {requests: {cpu: 250m}}}]`,
		requests: map[corev1.ResourceName]string{"cpu": "300m"},
	}, {
		name: "nothing asked counts nothing",
		manifest: `
kind: Deployment
spec:
  template:
    spec:
      containers: [{name: app}]`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(tc.manifest), &obj); err != nil {
				t.Fatal(err)
			}
			got, err := podresources.Of(obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(list(tc.requests), got.Requests, cmp.Comparer(equalQuantity)); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(list(tc.limits), got.Limits, cmp.Comparer(equalQuantity)); diff != "" {
				t.Errorf("limits (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOfRefusesWhatItCannotRead(t *testing.T) {
	for _, tc := range []struct {
		name, manifest, want string
	}{
		{"no pod template", `{kind: ConfigMap, data: {a: b}}`,
			"no pod template: looked at spec.jobTemplate.spec.template.spec, spec.template.spec and template.spec (a Pod's own spec for kind Pod)"},
		{"a Pod without a spec", `{kind: Pod}`, "spec: a Pod without a spec"},
		{"a quantity that is not one", `{kind: Deployment, spec: {template: {spec: {containers: [{name: a, resources: {requests: {cpu: lots}}}]}}}}`,
			`spec.template.spec.containers[0].resources.requests[cpu]: "lots": quantities must match`},
		{"an exponent apimachinery's parser never returns from", `{kind: Pod, spec: {overhead: {cpu: "1e2147483648"}, containers: [{name: a}]}}`,
			"spec.overhead[cpu]: "},
		{"a field of the wrong type", `{kind: Pod, spec: {containers: {name: a}}}`, "spec: not a pod spec: "},
	} {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(tc.manifest), &obj); err != nil {
			t.Fatal(err)
		}
		_, err := podresources.Of(obj)
		if err == nil || len(err.Error()) < len(tc.want) || err.Error()[:len(tc.want)] != tc.want {
			t.Errorf("%s: got %v, want an error beginning %q", tc.name, err, tc.want)
		}
	}
}

func list(m map[corev1.ResourceName]string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range m {
		out[k] = resource.MustParse(v)
	}
	return out
}

func equalQuantity(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }
