package plugin

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWarmWorkersNeverQueue: requests that block together all run at once
// (group commit needs them waiting together), and each gets its own
// response.
func TestWarmWorkersNeverQueue(t *testing.T) {
	const n = 50
	var started sync.WaitGroup
	started.Add(n)
	release := make(chan struct{})
	h := newWarmWorkers(time.Minute).handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started.Done()
		<-release
		_, _ = w.Write([]byte(r.URL.Path))
	}))
	var served sync.WaitGroup
	bodies := make([]string, n)
	for i := range n {
		served.Go(func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/"+string(rune('a'+i%26))+string(rune('0'+i/26)), nil))
			bodies[i] = rec.Body.String()
		})
	}
	started.Wait() // all n handlers run at once, or this never returns
	close(release)
	served.Wait()
	for i, got := range bodies {
		if want := "/" + string(rune('a'+i%26)) + string(rune('0'+i/26)); got != want {
			t.Errorf("request %d got body %q, want %q", i, got, want)
		}
	}
}

// TestWarmWorkersReuseAndPanic: a worker serves the next request on the same
// goroutine, and a panic reaches the request's goroutine, as without the
// workers.
func TestWarmWorkersReuseAndPanic(t *testing.T) {
	p := newWarmWorkers(time.Minute)
	ids := make(chan uint64, 2)
	h := p.handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic(http.ErrAbortHandler)
		}
		ids <- goroutineID()
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", nil))
	first := <-ids
	// The worker is idle once its result was handed back; let it reach its
	// receive before the next request looks for it.
	deadline := time.Now().Add(10 * time.Second)
	var second uint64
	for second != first && time.Now().Before(deadline) {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", nil))
		second = <-ids
	}
	if second != first {
		t.Errorf("requests ran on goroutines %d and %d: the idle worker was not reused", first, second)
	}

	defer func() {
		if err, _ := recover().(error); !errors.Is(err, http.ErrAbortHandler) {
			t.Errorf("recovered %v on the request's goroutine, want http.ErrAbortHandler", err)
		}
	}()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/panic", nil))
	t.Error("the handler's panic did not reach the request's goroutine")
}

// TestWarmWorkersExitWhenIdle: an idle worker exits after the idle time. A
// send only succeeds while a worker waits to receive, and each one that
// succeeds restarts that worker's idle time; sends spaced well beyond it
// start falling through once the worker has exited.
func TestWarmWorkersExitWhenIdle(t *testing.T) {
	p := newWarmWorkers(10 * time.Millisecond)
	p.run(func() {})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		select {
		case p.work <- func() {}:
		default:
			return
		}
	}
	t.Error("a worker idle for 10ms still took work after 30s")
}

// goroutineID is the running goroutine's number, from its stack header
// ("goroutine 42 [running]:").
func goroutineID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _ := strconv.ParseUint(strings.Fields(string(buf))[1], 10, 64)
	return id
}

// deepHandler recurses about as deep as a quota review does in OPA's
// evaluator, so a fresh goroutine grows its stack several times.
var deepHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = w.Write([]byte{byte(recurse(400))})
})

//go:noinline
func recurse(n int) int {
	var frame [32]int
	frame[n%32] = n
	if n == 0 {
		return frame[0]
	}
	return recurse(n-1) + frame[n%32]%2
}

// BenchmarkDeepRequest serves requests with deep stacks from 64 concurrent
// clients: on a goroutine per request, as net/http does, and on warm
// workers. Compare the two (benchstat): the difference is stack growth.
func BenchmarkDeepRequest(b *testing.B) {
	serve := func(b *testing.B, h http.Handler) {
		b.SetParallelism(64 / max(1, runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			req := httptest.NewRequest(http.MethodPost, "/", nil)
			for pb.Next() {
				done := make(chan struct{})
				go func() { // net/http's goroutine per request
					defer close(done)
					h.ServeHTTP(httptest.NewRecorder(), req)
				}()
				<-done
			}
		})
	}
	b.Run("goroutine-per-request", func(b *testing.B) { serve(b, deepHandler) })
	b.Run("warm-workers", func(b *testing.B) { serve(b, newWarmWorkers(time.Minute).handler(deepHandler)) })
}
