package v1alpha1_test

import (
	"reflect"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

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

// TestEveryKindWithConditionsIsAConditionSetter looks at every kind the API
// registers: one whose status has a conditions list must be a
// ConditionSetter, so that a kind added later without GetConditions fails
// here rather than in a test that waits for its condition.
func TestEveryKindWithConditionsIsAConditionSetter(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := quotav1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	conditionsType := reflect.TypeOf([]metav1.Condition{})
	var kinds []string
	for kind, typ := range scheme.KnownTypes(quotav1alpha1.GroupVersion) {
		status, ok := typ.FieldByName("Status")
		if !ok || status.Type.Kind() != reflect.Struct {
			continue
		}
		if conds, ok := status.Type.FieldByName("Conditions"); !ok || conds.Type != conditionsType {
			continue
		}
		kinds = append(kinds, kind)
		obj := reflect.New(typ).Interface()
		s, ok := obj.(quotav1alpha1.ConditionSetter)
		if !ok {
			t.Errorf("%s has status conditions but is not a ConditionSetter", kind)
			continue
		}
		// The setter writes the field the apiserver stores, and the getter
		// reads it back.
		cond := metav1.Condition{Type: "Probe", Status: metav1.ConditionTrue, Reason: "Probe"}
		if !quotav1alpha1.SetCondition(s, cond) {
			t.Errorf("%s: SetCondition on no conditions reported no change", kind)
		}
		field := reflect.ValueOf(obj).Elem().FieldByName("Status").FieldByName("Conditions").Interface().([]metav1.Condition)
		if len(field) != 1 || field[0].Type != "Probe" {
			t.Errorf("%s: Status.Conditions after SetCondition = %+v", kind, field)
		}
		if got := s.GetConditions(); len(got) != 1 || got[0].Type != "Probe" {
			t.Errorf("%s: GetConditions = %+v", kind, got)
		}
	}
	sort.Strings(kinds)
	want := []string{"AllowanceBucket", "ClaimCreationPolicy", "GrantCreationPolicy", "QuotaBypass", "ResourceClaim", "ResourceGrant", "ResourceRegistration"}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("kinds with status conditions = %v, want %v", kinds, want)
	}
}

func TestSetConditionKeepsTheTransitionTimeWhileTheStatusHolds(t *testing.T) {
	g := &quotav1alpha1.ResourceGrant{}
	then := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	g.SetConditions([]metav1.Condition{{Type: quotav1alpha1.ConditionActive, Status: metav1.ConditionTrue, Reason: "A", LastTransitionTime: then}})
	if quotav1alpha1.SetCondition(g, metav1.Condition{Type: quotav1alpha1.ConditionActive, Status: metav1.ConditionTrue, Reason: "A"}) {
		t.Error("setting the same condition reported a change")
	}
	if got := g.Status.Conditions[0].LastTransitionTime; !got.Equal(&then) {
		t.Errorf("LastTransitionTime = %v, want %v (unchanged status)", got, then)
	}
	if !quotav1alpha1.SetCondition(g, metav1.Condition{Type: quotav1alpha1.ConditionActive, Status: metav1.ConditionFalse, Reason: "B"}) {
		t.Error("a new status reported no change")
	}
	if c := g.Status.Conditions[0]; c.Status != metav1.ConditionFalse || c.Reason != "B" || c.LastTransitionTime.Equal(&then) {
		t.Errorf("after a new status: %+v", c)
	}
}

// A claim is decided by a Granted condition, True or False, for its current
// generation; Unknown (waiting or retrying), none, or one for an older
// generation leaves it pending.
func TestClaimIsDecidedByAGrantedConditionForItsGeneration(t *testing.T) {
	granted := func(status metav1.ConditionStatus, gen int64) []metav1.Condition {
		return []metav1.Condition{{Type: quotav1alpha1.ConditionGranted, Status: status, ObservedGeneration: gen}}
	}
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		want  bool
	}{
		{"no condition", nil, false},
		{"granted", granted(metav1.ConditionTrue, 1), true},
		{"denied", granted(metav1.ConditionFalse, 1), true},
		{"pending evaluation", granted(metav1.ConditionUnknown, 1), false},
		{"granted for an older generation", granted(metav1.ConditionTrue, 0), false},
	} {
		c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Status: quotav1alpha1.ResourceClaimStatus{Conditions: tc.conds}}
		if got := c.Decided(); got != tc.want {
			t.Errorf("%s: Decided() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
