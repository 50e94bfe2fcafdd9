package observer

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/util/workqueue"
)

// A panic in one item's work is that item's error, retried with backoff;
// the worker goes on with the next item.
func TestWorkRecoversAPanicAsTheItemsError(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	q.Add("bad")
	q.Add("good")
	var failures []string
	fn := func(it string) error {
		if it == "bad" {
			panic("evaluating bad")
		}
		return nil
	}
	failed := func(it string, err error) { failures = append(failures, it+": "+err.Error()) }
	for range 2 {
		if !work(q, fn, failed) {
			t.Fatal("the queue shut down")
		}
	}
	if len(failures) != 1 || !strings.HasPrefix(failures[0], "bad: panic: evaluating bad") {
		t.Fatalf("failures %q, want the panic as bad's error", failures)
	}
	if q.NumRequeues("bad") != 1 || q.NumRequeues("good") != 0 {
		t.Fatalf("requeues bad %d good %d, want 1 and 0", q.NumRequeues("bad"), q.NumRequeues("good"))
	}
	if err := recovered(func(string) error { return errors.New("plain") }, ""); err == nil || err.Error() != "plain" {
		t.Fatalf("an ordinary error: %v", err)
	}
}
