package v1alpha1_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

func TestConditionsAnswerForTheCurrentGenerationOnly(t *testing.T) {
	cond := func(status metav1.ConditionStatus, gen int64) []metav1.Condition {
		return []metav1.Condition{{Type: quotav1alpha1.ConditionActive, Status: status, ObservedGeneration: gen}}
	}
	for _, tc := range []struct {
		name                     string
		conds                    []metav1.Condition
		current, isTrue, isFalse bool
	}{
		{"absent", nil, false, false, false},
		{"true", cond(metav1.ConditionTrue, 2), true, true, false},
		{"false", cond(metav1.ConditionFalse, 2), true, false, true},
		{"unknown", cond(metav1.ConditionUnknown, 2), true, false, false},
		{"true for an older generation", cond(metav1.ConditionTrue, 1), false, false, false},
		{"false for an older generation", cond(metav1.ConditionFalse, 1), false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quotav1alpha1.IsCurrent(tc.conds, quotav1alpha1.ConditionActive, 2); got != tc.current {
				t.Errorf("IsCurrent = %v, want %v", got, tc.current)
			}
			if got := quotav1alpha1.IsTrue(tc.conds, quotav1alpha1.ConditionActive, 2); got != tc.isTrue {
				t.Errorf("IsTrue = %v, want %v", got, tc.isTrue)
			}
			if got := quotav1alpha1.IsFalse(tc.conds, quotav1alpha1.ConditionActive, 2); got != tc.isFalse {
				t.Errorf("IsFalse = %v, want %v", got, tc.isFalse)
			}
		})
	}
}

func TestBucketNamespace(t *testing.T) {
	for _, tc := range []struct {
		consumer quotav1alpha1.ConsumerRef
		want     string
	}{
		{quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-a"}, "team-a"},
		{quotav1alpha1.ConsumerRef{APIGroup: "apps.example.com", Kind: "App", Name: "web", Namespace: "team-b"}, "team-b"},
		{quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}, "sys"},
		// A Namespace kind in another group is an ordinary cluster-scoped consumer.
		{quotav1alpha1.ConsumerRef{APIGroup: "example.com", Kind: "Namespace", Name: "x"}, "sys"},
	} {
		if got := quotav1alpha1.BucketNamespace(tc.consumer, "sys"); got != tc.want {
			t.Errorf("BucketNamespace(%v) = %q, want %q", tc.consumer, got, tc.want)
		}
	}
}
