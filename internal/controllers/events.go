package controllers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/quotakeeper/quotakeeper/internal/eventnote"
)

// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Actions of the Events the controllers record (events.k8s.io/v1 says what
// was done; the reason says how it came out).
const (
	actionDecide   = "Decide"   // a claim's decision
	actionJudge    = "Judge"    // a grant's verdict
	actionSetLimit = "SetLimit" // a bucket's limit written from its grants
)

// recordCondition records a condition the controller has just written as an
// Event on obj, so `kubectl describe` and `kubectl events` show the
// decision and its numbers where users look: Normal when it is True,
// Warning when False; an Unknown condition (still deciding) records
// nothing. Called only when the status changed, so a replay records
// nothing; the recorder folds repeats into one series.
func recordCondition(rec events.EventRecorder, obj runtime.Object, cond metav1.Condition, action string) {
	if rec == nil || cond.Status == metav1.ConditionUnknown {
		return
	}
	eventType := corev1.EventTypeNormal
	if cond.Status == metav1.ConditionFalse {
		eventType = corev1.EventTypeWarning
	}
	rec.Eventf(obj, nil, eventType, cond.Reason, action, "%s", eventnote.Fit(cond.Message))
}
