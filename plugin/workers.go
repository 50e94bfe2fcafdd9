package plugin

import (
	"net/http"
	"time"
)

// Warm workers for the validation webhook.
//
// net/http serves each admission request on a goroutine of its own, which
// starts with a few kilobytes of stack. OPA's evaluator recurses deeply (a
// quota template's review nests dozens of frames per rule), so every request
// grew its stack several times over, copying it each time: 14% of
// Gatekeeper's CPU in `make load`'s shared-quota phase went to
// runtime.newstack and copystack. warmWorkers runs each request on a
// goroutine that outlives it, whose stack has already grown, as gRPC's
// server does with its NumStreamWorkers option.
//
// It never queues: a request that finds no idle worker starts a new one, so
// concurrency stays what Gatekeeper's own --max-serving-threads allows (group
// commit batches the reservations of requests that wait together). A worker
// idle for workerIdle exits.
type warmWorkers struct {
	// work hands a request to an idle worker; unbuffered, so a send
	// succeeds only when one is waiting.
	work chan func()
	idle time.Duration
}

// workerIdle is how long a worker waits for another request before it
// exits: long enough to span the gaps of a busy webhook, short enough that
// a burst's workers do not outlive it by much.
const workerIdle = time.Minute

func newWarmWorkers(idle time.Duration) *warmWorkers {
	return &warmWorkers{work: make(chan func()), idle: idle}
}

// run runs f on an idle worker, or on a new one.
func (p *warmWorkers) run(f func()) {
	select {
	case p.work <- f:
	default:
		go p.worker(f)
	}
}

func (p *warmWorkers) worker(f func()) {
	f()
	idle := time.NewTimer(p.idle)
	defer idle.Stop()
	for {
		select {
		case f := <-p.work:
			f()
			idle.Reset(p.idle)
		case <-idle.C:
			return
		}
	}
}

// handler serves h's requests on the workers. A panic in h is raised again
// on the request's own goroutine, where net/http recovers it as it would
// have without the workers.
func (p *warmWorkers) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		done := make(chan any, 1)
		p.run(func() {
			defer func() { done <- recover() }()
			h.ServeHTTP(w, r)
		})
		if v := <-done; v != nil {
			panic(v)
		}
	})
}
