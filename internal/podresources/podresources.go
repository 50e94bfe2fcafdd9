// Package podresources says what one pod of an object holds, by Kubernetes'
// own rules: the requests and limits the scheduler and in-tree
// ResourceQuota see once the pod exists. A quota that counts CPU or memory
// must agree with them, or a tenant walks past it by moving the amount where
// a hand-written sum does not look (pod-level resources, limits without
// requests, init containers, sidecars).
//
// It is separate because admission (the quota.pod_resources builtin) and
// the observer (which evaluates the same Rego) must count alike, and
// because it is the one place that knows where a workload keeps its pod.
package podresources

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	kjson "sigs.k8s.io/json"

	"github.com/quotakeeper/quotakeeper/internal/quantities"
)

// Resources is what one pod holds.
type Resources struct {
	Requests corev1.ResourceList
	Limits   corev1.ResourceList
}

// templatePaths are where the kinds that make pods keep their pod spec:
// a CronJob's job template, then the template of a Deployment, ReplicaSet,
// StatefulSet, DaemonSet, Job, ReplicationController or PodTemplate.
var templatePaths = [][]string{
	{"spec", "jobTemplate", "spec", "template", "spec"},
	{"spec", "template", "spec"},
	{"template", "spec"},
}

// Of returns what one pod of obj holds: obj's own spec for a Pod, else its
// pod template's. An object with no pod spec, or one that does not decode as
// a PodSpec, is an error naming the field: a quota that cannot tell what an
// object asks for must deny, never count 0.
func Of(obj map[string]any) (Resources, error) {
	spec, path, err := podSpec(obj)
	if err != nil {
		return Resources{}, err
	}
	if err := checkQuantities(path, spec); err != nil {
		return Resources{}, err
	}
	// Through JSON, as the API server decodes it: the map may hold numbers
	// as json.Number (from Rego), which the unstructured converter refuses.
	data, err := json.Marshal(spec)
	if err != nil {
		return Resources{}, fmt.Errorf("%s: %w", path, err)
	}
	var ps corev1.PodSpec
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &ps); err != nil {
		return Resources{}, fmt.Errorf("%s: not a pod spec: %w", path, err)
	}
	pod := &corev1.Pod{Spec: ps}
	defaultRequests(pod)
	return Resources{
		Requests: resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}),
		Limits:   resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{}),
	}, nil
}

// quantityMaps are the keys under which a pod spec holds quantities.
var quantityMaps = map[string]bool{"requests": true, "limits": true, "overhead": true}

// checkQuantities parses every quantity the decoder will, first, through
// quantities.Parse: apimachinery's parser never returns on some exponents
// (package quantities), and an object's fields are the tenant's to write.
func checkQuantities(path string, v any) error {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if m, ok := v[k].(map[string]any); ok && quantityMaps[k] {
				for _, name := range slices.Sorted(maps.Keys(m)) {
					s, ok := m[name].(string)
					if !ok {
						continue // a number: the decoder takes it as it is
					}
					if _, err := quantities.Parse(s); err != nil {
						return fmt.Errorf("%s.%s[%s]: %q: %w", path, k, name, s, err)
					}
				}
				continue
			}
			if err := checkQuantities(path+"."+k, v[k]); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range v {
			if err := checkQuantities(fmt.Sprintf("%s[%d]", path, i), e); err != nil {
				return err
			}
		}
	}
	return nil
}

func podSpec(obj map[string]any) (map[string]any, string, error) {
	if kind, _ := obj["kind"].(string); kind == "Pod" {
		spec, ok := obj["spec"].(map[string]any)
		if !ok {
			return nil, "spec", fmt.Errorf("spec: a Pod without a spec")
		}
		return spec, "spec", nil
	}
	for _, p := range templatePaths {
		if spec, ok := lookup(obj, p); ok {
			return spec, joinPath(p), nil
		}
	}
	return nil, "", fmt.Errorf("no pod template: looked at %s, %s and %s (a Pod's own spec for kind Pod)",
		joinPath(templatePaths[0]), joinPath(templatePaths[1]), joinPath(templatePaths[2]))
}

func lookup(obj map[string]any, path []string) (map[string]any, bool) {
	cur := obj
	for _, k := range path {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

func joinPath(p []string) string { return strings.Join(p, ".") }

// defaultRequests applies what the API server's defaulting of a Pod does to
// its resources (k8s.io/kubernetes/pkg/apis/core/v1 SetDefaults_Pod and
// defaultPodRequests, v1.36, which a library cannot import): a container's
// requests default to its limits, and pod-level requests, when pod-level
// limits are set, default to the containers' aggregate requests (CPU and
// memory) and then to the pod-level limits. A pod template is not
// defaulted so: its pods are, when they are created, and that is what they
// hold. Defaulting a Pod a second time changes nothing.
func defaultRequests(pod *corev1.Pod) {
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			r := &cs[i].Resources
			for name, q := range r.Limits {
				if _, ok := r.Requests[name]; !ok {
					if r.Requests == nil {
						r.Requests = corev1.ResourceList{}
					}
					r.Requests[name] = q.DeepCopy()
				}
			}
		}
	}
	pr := pod.Spec.Resources
	if pr == nil || len(pr.Limits) == 0 {
		return
	}
	reqs := maps.Clone(pr.Requests)
	if reqs == nil {
		reqs = corev1.ResourceList{}
	}
	for name, q := range resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{}) {
		if _, ok := reqs[name]; !ok && overcommittable(name) {
			reqs[name] = q.DeepCopy()
		}
	}
	for name, q := range pr.Limits {
		if _, ok := reqs[name]; !ok && resourcehelper.IsSupportedPodLevelResource(name) {
			reqs[name] = q.DeepCopy()
		}
	}
	if len(reqs) > 0 {
		pr.Requests = reqs
	}
}

// overcommittable: the pod-level resources whose requests may be below
// their limits (core/v1 helper IsOvercommitAllowed: not hugepages).
func overcommittable(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory
}
