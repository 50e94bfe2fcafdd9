package builtinhost

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

func registration(name, resourceType string, active bool, u quotav1alpha1.Units) *quotav1alpha1.ResourceRegistration {
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	reg.Spec.ResourceType = resourceType
	reg.Spec.BaseUnit, reg.Spec.DisplayUnit, reg.Spec.UnitConversionFactor = u.BaseUnit, u.DisplayUnit, u.UnitConversionFactor
	status := metav1.ConditionFalse
	if active {
		status = metav1.ConditionTrue
	}
	reg.Status.Conditions = []metav1.Condition{{Type: quotav1alpha1.ConditionActive, Status: status}}
	return reg
}

// The units of a resource type are its active registration's, follow its
// updates, and go with its deletion (also when the informer only saw the
// tombstone).
func TestRegistrationUnits(t *testing.T) {
	const rt = "compute.example.com/cpu"
	cores := quotav1alpha1.Units{BaseUnit: "millicores", DisplayUnit: "cores", UnitConversionFactor: 1000}
	other := quotav1alpha1.Units{BaseUnit: "m", DisplayUnit: "k", UnitConversionFactor: 7}
	want := func(r *registrationUnits, u quotav1alpha1.Units, ok bool) {
		t.Helper()
		if got, gotOK := r.UnitsFor(rt); got != u || gotOK != ok {
			t.Fatalf("UnitsFor(%s) = %+v, %v; want %+v, %v", rt, got, gotOK, u, ok)
		}
	}
	r := newRegistrationUnits()
	want(r, quotav1alpha1.Units{}, false)
	r.set(registration("second", rt, false, other)) // an inactive second registration
	want(r, quotav1alpha1.Units{}, false)
	r.set(registration("cpu", rt, true, cores))
	want(r, cores, true)
	updated := registration("cpu", rt, true, quotav1alpha1.Units{BaseUnit: "millicores", DisplayUnit: "kilocores", UnitConversionFactor: 1000000})
	r.set(updated)
	want(r, quotav1alpha1.UnitsOf(updated), true)
	deleting := updated.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	r.set(deleting)
	want(r, quotav1alpha1.Units{}, false)
	r.set(updated)
	r.forget(toolscache.DeletedFinalStateUnknown{Key: "cpu", Obj: updated})
	want(r, quotav1alpha1.Units{}, false)
	if _, ok := r.UnitsFor("core/configmaps"); ok {
		t.Fatal("units for a resource type never registered")
	}
}
