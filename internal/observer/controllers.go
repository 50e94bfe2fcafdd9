package observer

// The observer's work runs as three controller-runtime controllers, each
// with the rate-limited workqueue, panic recovery, logging and reconcile
// metrics (controller_runtime_reconcile_total{controller=...}) every
// controller has: observer-evaluate (templates, constraints, objects,
// claims, resyncs), observer-write (buckets) and observer-views
// (ResourceClaim views, when on). They are not the manager's: they
// reconcile the observer's own keys (an item, a bucket key, a view name),
// which its informers' handlers and its own code queue, and Start starts
// them only once the initial load is done.
//
// A panic is the item's failure, as an error is: the item is retried with
// backoff, and what it would have counted stays uncounted, so its recount,
// if any, is not published (fail closed); the leading manager goes on.

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
)

// The controllers' names: their metrics' controller label, their
// workqueues' name label, their logs' controller value.
const (
	evaluateController = "observer-evaluate"
	writeController    = "observer-write"
	viewsController    = "observer-views"
)

// newController returns a controller named name that runs do on workers
// goroutines, and its queue. The queue is made now, not when the
// controller starts as controller-runtime would: what the informers and
// the initial load queue before Start starts the controller waits there,
// as the controller's first work. The caller shuts the queue down if the
// controller never starts (the controller does once it has).
//
// A failure is logged by the controller, through log with logItem's
// values, and the item requeued with the rate limiter's backoff; a panic
// is recovered, logged with its stack, counted in
// controller_runtime_reconcile_panics_total, and is the item's failure.
// skipNameValidation is the manager's (tests run several observers in one
// process).
func newController[T comparable](name string, workers int, skipNameValidation *bool, log logr.Logger, logItem func(T) []any,
	do reconcile.TypedReconciler[T]) (controller.TypedController[T], workqueue.TypedRateLimitingInterface[T], error) {
	rateLimiter := workqueue.DefaultTypedControllerRateLimiter[T]()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter, workqueue.TypedRateLimitingQueueConfig[T]{Name: name})
	log = log.WithValues("controller", name)
	c, err := controller.NewTypedUnmanaged(name, controller.TypedOptions[T]{
		Reconciler:              do,
		MaxConcurrentReconciles: workers,
		RecoverPanic:            ptr.To(true),
		SkipNameValidation:      skipNameValidation,
		RateLimiter:             rateLimiter,
		NewQueue: func(string, workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
			return queue
		},
		LogConstructor: func(it *T) logr.Logger {
			if it == nil {
				return log
			}
			return log.WithValues(logItem(*it)...)
		},
	})
	if err != nil {
		queue.ShutDown()
		return nil, nil, err
	}
	return c, queue, nil
}

// countFailures is do as a reconciler that also counts each failure, a
// panic included, in quotakeeper_observer_errors_total{operation}. A panic
// goes on to the controller, which recovers it.
func countFailures[T comparable](operation string, do func(context.Context, T) error) reconcile.TypedFunc[T] {
	return func(ctx context.Context, it T) (reconcile.Result, error) {
		defer func() {
			if r := recover(); r != nil {
				metrics.ObserverError(operation)
				panic(r)
			}
		}()
		if err := do(ctx, it); err != nil {
			metrics.ObserverError(operation)
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, nil
	}
}

func logItem(it item) []any {
	return []any{"kind", it.gvk.Kind, "namespace", it.namespace, "name", it.name}
}

func logBucket(key ledger.BucketKey) []any { return []any{"bucket", key.Name()} }

func logView(name types.NamespacedName) []any { return []any{"view", name.String()} }

// evaluateNow evaluates it at once through the evaluate controller's
// reconciler, outside its queue (the initial load): a failure or a panic is
// counted, recovered and logged as the controller's are, and returned.
func evaluateNow(ctx context.Context, evaluate controller.TypedController[item], it item) error {
	_, err := evaluate.Reconcile(logf.IntoContext(ctx, evaluate.GetLogger().WithValues(logItem(it)...)), it)
	return err
}
