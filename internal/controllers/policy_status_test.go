package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

func TestReadyCondition(t *testing.T) {
	unregistered := field.ErrorList{field.Invalid(field.NewPath("spec", "x"), "t", "not registered")}
	cases := []struct {
		name     string
		disabled bool
		problems field.ErrorList
		want     metav1.Condition
	}{
		{"ready", false, nil, metav1.Condition{Status: metav1.ConditionTrue, Reason: quotav1alpha1.ReasonPolicyReady, Message: "the policy is valid and in use"}},
		{"problems", false, unregistered, metav1.Condition{Status: metav1.ConditionFalse, Reason: quotav1alpha1.ReasonValidationFailed,
			Message: `spec.x: Invalid value: "t": not registered`}},
		{"disabled comes first", true, unregistered, metav1.Condition{Status: metav1.ConditionFalse, Reason: quotav1alpha1.ReasonPolicyDisabled,
			Message: "spec.disabled is true"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.Type, tc.want.ObservedGeneration = quotav1alpha1.ConditionReady, 3
			if diff := cmp.Diff(tc.want, readyCondition(3, tc.disabled, tc.problems)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
