package testenv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// RequireInvalid asserts err is a 422 Invalid whose causes include one for
// field with exactly message want, as a webhook words it.
func RequireInvalid(t testing.TB, err error, field, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want %s rejected with %q", field, want)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) || status.Status().Details == nil {
		t.Fatalf("want Invalid with details, got %v", err)
	}
	var seen []string
	for _, c := range status.Status().Details.Causes {
		seen = append(seen, c.Field+": "+c.Message)
		if c.Field == field && c.Message == want {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("message %q does not carry %q", err.Error(), want)
			}
			return
		}
	}
	t.Fatalf("no cause %s: %q; causes:\n  %s", field, want, strings.Join(seen, "\n  "))
}

// WaitCondition waits up to timeout for obj's condition of type typ to have
// status and reason for obj's current generation (obj is read through c
// into obj), and returns its message.
func WaitCondition(t testing.TB, c client.Client, timeout time.Duration, obj quotav1alpha1.ConditionGetter, typ string, status metav1.ConditionStatus, reason string) string {
	t.Helper()
	var msg string
	Eventually(t, timeout, "condition "+typ, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(obj.GetConditions(), typ)
		if cond == nil || cond.Status != status || cond.Reason != reason || cond.ObservedGeneration != obj.GetGeneration() {
			return fmt.Errorf("%s %s: condition %s = %+v, want %s/%s for generation %d", obj.GetObjectKind().GroupVersionKind().Kind,
				obj.GetName(), typ, cond, status, reason, obj.GetGeneration())
		}
		msg = cond.Message
		return nil
	})
	return msg
}
