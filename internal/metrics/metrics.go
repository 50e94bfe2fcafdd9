// Package metrics holds quotakeeper's Prometheus metrics, every name
// prefixed quotakeeper_ (docs/metrics.md lists them with their labels).
//
// As in Kueue's pkg/metrics, the collectors are package-level and call sites
// use the small helpers below, so instrumenting a path costs a counter
// increment or a histogram observation and no allocation. The collectors
// record whether or not a process registers them; each process registers
// what it serves:
//
//   - Gatekeeper, through the plugin: RegisterGatekeeper on
//     prometheus.DefaultRegisterer, which Gatekeeper's Prometheus exporter
//     serves (promhttp.Handler) on its --prometheus-port.
//   - The manager: RegisterManager on controller-runtime's metrics.Registry,
//     served on its --metrics-bind-address, with collectors that read the
//     buckets and the claims from the manager's cache at scrape time.
package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const namespace = "quotakeeper"

// Results of an admission decision (quota.reserve), the decisions metric's
// result label.
const (
	ResultGranted = "granted"
	ResultDenied  = "denied"
	ResultHalted  = "halted"
)

// Causes of a halt: the halts metric's cause label.
const (
	// CauseInvalidInput: the policy passed a claim or query the builtin
	// cannot read (a policy bug, or an object the policy did not expect).
	CauseInvalidInput = "invalid_input"
	// CauseNotReady: no ledger yet, because the grant mirror has not synced.
	CauseNotReady = "not_ready"
	// CauseLedgerError: the ledger could not decide (a store error, an
	// unknown limit, a rollback that failed).
	CauseLedgerError = "ledger_error"
	// CauseDeadline: the call's deadline (the plugin's --quota-deadline) or
	// the admission request's context ended before the ledger decided; what
	// the call wrote is undone behind it.
	CauseDeadline = "deadline"
	// CausePolicyError: the ClaimCreationPolicies could not be read.
	CausePolicyError = "policy_error"
	// CauseInternal: the result could not be encoded for Rego.
	CauseInternal = "internal"
)

// Operations of the observer that can fail: the observer errors metric's
// operation label.
const (
	OperationEvaluate = "evaluate"
	OperationWrite    = "write"
)

var (
	admissionDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "admission_decisions_total",
		Help:      "Decisions of quota.reserve at admission, by result: granted, denied (the bucket had no room), halted (failed closed, see quotakeeper_halts_total).",
	}, []string{"result"})
	decisionsGranted = admissionDecisions.WithLabelValues(ResultGranted)
	decisionsDenied  = admissionDecisions.WithLabelValues(ResultDenied)
	decisionsHalted  = admissionDecisions.WithLabelValues(ResultHalted)

	reserveDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace,
		Name:      "reserve_duration_seconds",
		Help:      "Time quota.reserve spent in the ledger deciding a claim (reading and writing its buckets), granted or denied.",
		Buckets:   prometheus.ExponentialBuckets(0.001, 2, 15), // 1ms to 16s
	})

	// providerDuration is the External Data provider's side of a quota
	// check on a stock Gatekeeper: finer buckets than reserveDuration's
	// (a factor of about 1.5), since its p99 is judged against the
	// Provider's timeout and reported by make load GATEKEEPER=stock.
	providerDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace,
		Name:      "external_data_request_duration_seconds",
		Help:      "Time the External Data provider took to answer one request of Gatekeeper's (every key of it), from its arrival to its answer.",
		Buckets:   prometheus.ExponentialBucketsRange(0.001, 10, 24), // 1ms to 10s
	})

	halts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "halts_total",
		Help:      "Builtin calls that halted, so the evaluation failed closed (Gatekeeper denies), by builtin and cause.",
	}, []string{"builtin", "cause"})

	leasedAdmissions = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "leased_admissions_total",
		Help:      "Creates quota.reserve granted inside this replica's capacity lease, with no synchronous bucket write (the plugin's capacityLeases setting).",
	})

	writeConflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "bucket_write_conflicts_total",
		Help:      "AllowanceBucket status writes refused by the apiserver's compare-and-swap (another writer got there first); each is re-read and retried.",
	})

	batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace,
		Name:      "group_commit_batch_size",
		Help:      "Mutations of one bucket carried by one group-commit batch (one status write, retries aside).",
		Buckets:   prometheus.ExponentialBuckets(1, 2, 9), // 1 to 256, the default MaxBatch
	})

	observerLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace,
		Name:      "observer_lag_seconds",
		Help:      "Time from an event on a counted object to the write of the bucket usage that counts it, including evaluation, queueing, the write interval and retries.",
		Buckets:   prometheus.ExponentialBuckets(0.05, 2, 12), // 50ms to 102s
	})

	observerErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "observer_errors_total",
		Help:      "Observer failures, retried with backoff, by operation: evaluate (an object or claim) or write (a bucket's observed usage).",
	}, []string{"operation"})
	observerEvaluateErrors = observerErrors.WithLabelValues(OperationEvaluate)
	observerWriteErrors    = observerErrors.WithLabelValues(OperationWrite)
)

// LeasedAdmission counts a create granted inside a capacity lease.
func LeasedAdmission() { leasedAdmissions.Inc() }

// Decision counts one quota.reserve decision that reached the ledger and
// the time the ledger took.
func Decision(granted bool, took time.Duration) {
	reserveDuration.Observe(took.Seconds())
	if granted {
		decisionsGranted.Inc()
	} else {
		decisionsDenied.Inc()
	}
}

// ProviderRequest records how long the External Data provider took to
// answer one request.
func ProviderRequest(took time.Duration) { providerDuration.Observe(took.Seconds()) }

// Halted counts a builtin call that halted, with its cause. A halt of
// quota.reserve outside an observation is also an admission decision.
func Halted(builtin, cause string, admission bool) {
	halts.WithLabelValues(builtin, cause).Inc()
	if admission {
		decisionsHalted.Inc()
	}
}

// WriteConflict counts a bucket status write lost to compare-and-swap.
func WriteConflict() { writeConflicts.Inc() }

// Batch records the size of one group-commit batch.
func Batch(n int) { batchSize.Observe(float64(n)) }

// ObserverLag records how long after its event a change reached its bucket.
func ObserverLag(d time.Duration) { observerLag.Observe(d.Seconds()) }

// ObserverError counts a failed observer operation (OperationEvaluate or
// OperationWrite).
func ObserverError(operation string) {
	switch operation {
	case OperationEvaluate:
		observerEvaluateErrors.Inc()
	case OperationWrite:
		observerWriteErrors.Inc()
	default:
		observerErrors.WithLabelValues(operation).Inc()
	}
}

// storeCollectors are recorded wherever the ledger writes buckets: both
// processes.
func storeCollectors() []prometheus.Collector {
	return []prometheus.Collector{writeConflicts, batchSize}
}

// RegisterGatekeeper registers what the plugin records inside Gatekeeper:
// admission decisions, reserve latency, halts, and the bucket store's
// conflicts and batches.
func RegisterGatekeeper(reg prometheus.Registerer) error {
	return register(reg, append(admissionCollectors(), storeCollectors()...))
}

// RegisterAdmission registers the admission metrics (decisions, reserve
// latency, halts) in the manager when it serves the External Data
// provider: there the builtins decide for a stock Gatekeeper and record
// what the plugin records inside Gatekeeper; and the provider's own
// request latency.
func RegisterAdmission(reg prometheus.Registerer) error {
	return register(reg, append(admissionCollectors(), providerDuration))
}

// admissionCollectors are recorded wherever the builtins decide
// admissions.
func admissionCollectors() []prometheus.Collector {
	return []prometheus.Collector{admissionDecisions, reserveDuration, halts, leasedAdmissions}
}

// RegisterManager registers the manager's metrics: every bucket's numbers
// and the claims waiting for a decision, read from cache (the manager's) at
// scrape time, the observer's lag and errors, the bucket store's conflicts
// and batches, and when the serving certificate expires.
func RegisterManager(reg prometheus.Registerer, cache client.Reader) error {
	return register(reg, append([]prometheus.Collector{
		NewBucketCollector(cache, time.Now), NewClaimCollector(cache, time.Now), servingCertificateCollector{},
		observerLag, observerErrors,
	}, storeCollectors()...))
}

// register registers every collector; one already registered (a second
// call, as tests make) is not an error.
func register(reg prometheus.Registerer, cs []prometheus.Collector) error {
	var errs []error
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) {
				continue
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
