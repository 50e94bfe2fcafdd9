package validation_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/quotakeeper/quotakeeper/internal/validation"
)

func TestValidateQuotaConstraintScopesByParameters(t *testing.T) {
	for _, tc := range []struct {
		name, kind, spec string
		want             []string
	}{
		{name: "parameters.labelSelector", kind: "QuotaEntity",
			spec: `{parameters: {resourceType: x, labelSelector: {matchLabels: {quota: counted}}}}`},
		{name: "match.labelSelector", kind: "QuotaEntity",
			spec: `{match: {labelSelector: {matchLabels: {quota: counted}}}, parameters: {resourceType: x}}`,
			want: []string{"spec.match.labelSelector: Forbidden: a quota constraint cannot scope by match.labelSelector: an update that labels an object into scope would pass as unchanged; " +
				"use parameters.labelSelector, which the quota library applies to the object before and after an update"}},
		{name: "a malformed selector", kind: "QuotaAllocation",
			spec: `{parameters: {resourceType: x, labelSelector: {matchExpressions: [{key: tier, operator: Near, values: [a]}]}, amount: {path: [spec, size]}}}`,
			want: []string{`spec.parameters.labelSelector.matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var spec map[string]any
			if err := yaml.Unmarshal([]byte(tc.spec), &spec); err != nil {
				t.Fatal(err)
			}
			c := &unstructured.Unstructured{Object: map[string]any{"kind": tc.kind, "spec": spec}}
			var got []string
			for _, e := range validation.ValidateQuotaConstraint(c) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateQuotaConstraintScale(t *testing.T) {
	const needScale = `spec.match.kinds: Required value: a QuotaAllocation whose amount depends on replicas (parameters.amount.replicasPath) must also match {apiGroups: ["autoscaling"], kinds: ["Scale"]}: ` +
		"kubectl scale and autoscalers change replicas through the scale subresource, which Gatekeeper reviews as an autoscaling/v1 Scale"
	for _, tc := range []struct {
		name, spec string
		want       []string
	}{{
		name: "replicas counted, Scale matched and its target listed",
		spec: `{match: {kinds: [{apiGroups: [apps], kinds: [Deployment]}, {apiGroups: [autoscaling], kinds: [Scale]}]},
			parameters: {scaleTargets: [{apiGroup: apps, kind: Deployment}], amount: {resource: cpu, replicasPath: [spec, replicas]}}}`,
	}, {
		name: "no replicas counted: nothing to check",
		spec: `{match: {kinds: [{apiGroups: [""], kinds: [PersistentVolumeClaim]}]}, parameters: {amount: {path: [spec, resources, requests, storage]}}}`,
	}, {
		name: "the shipped samples before issue 22: Scale not matched, no target",
		spec: `{match: {kinds: [{apiGroups: [apps], kinds: [Deployment]}]}, parameters: {amount: {resource: cpu, replicasPath: [spec, replicas]}}}`,
		want: []string{needScale,
			`spec.parameters.scaleTargets: Required value: must list {apiGroup: "apps", kind: "Deployment"} (matched in spec.match.kinds[0]): its Scales are checked only for the kinds listed here`},
	}, {
		name: "Scale matched, one of two workloads listed",
		spec: `{match: {kinds: [{apiGroups: [apps], kinds: [Deployment, StatefulSet]}, {apiGroups: ["*"], kinds: ["*"]}]},
			parameters: {scaleTargets: [{apiGroup: apps, kind: Deployment}], amount: {resource: cpu, replicasPath: [spec, replicas]}}}`,
		want: []string{`spec.parameters.scaleTargets: Required value: must list {apiGroup: "apps", kind: "StatefulSet"} (matched in spec.match.kinds[0]): its Scales are checked only for the kinds listed here`},
	}, {
		name: "a ReplicationController of the core group",
		spec: `{match: {kinds: [{apiGroups: [""], kinds: [ReplicationController]}, {apiGroups: [autoscaling], kinds: [Scale]}]},
			parameters: {amount: {resource: cpu, replicasPath: [spec, replicas]}}}`,
		want: []string{`spec.parameters.scaleTargets: Required value: must list {apiGroup: "", kind: "ReplicationController"} (matched in spec.match.kinds[0]): its Scales are checked only for the kinds listed here`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var spec map[string]any
			if err := yaml.Unmarshal([]byte(tc.spec), &spec); err != nil {
				t.Fatal(err)
			}
			c := &unstructured.Unstructured{Object: map[string]any{"kind": "QuotaAllocation", "spec": spec}}
			var got []string
			for _, e := range validation.ValidateQuotaConstraint(c) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
