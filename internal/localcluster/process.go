package localcluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// Process is a local server process with its output in a log file. It can be
// killed with SIGKILL and started again with the same arguments, which is how
// the end-to-end tests crash a Gatekeeper replica or the manager.
type Process struct {
	Name    string
	Path    string
	Args    []string
	Env     []string
	LogPath string
	// Ready is polled after start until it answers 200.
	Ready string
	// Metrics is the URL of the process's Prometheus endpoint: Gatekeeper's
	// --prometheus-port (where the plugin's quotakeeper_* metrics are),
	// the manager's --metrics-bind-address.
	Metrics string
	// MetricsToken, when set, is the bearer token a scrape presents, and
	// MetricsCA what the HTTPS endpoint's certificate chains to: the
	// manager serves metrics to authorized callers only (--metrics-secure).
	MetricsToken string
	MetricsCA    []byte

	mu sync.Mutex
	// metricsClient is Scrape's client with MetricsCA (scrapeClient).
	metricsClient *http.Client
	// pid leads the process group; zero before the first start.
	pid  int
	done chan struct{}
}

// Start launches the process and waits until Ready answers.
func (p *Process) Start(ctx context.Context, timeout time.Duration) error {
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group: an interrupted `make run` must not leave it behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(done) }()
	p.mu.Lock()
	p.pid, p.done = cmd.Process.Pid, done
	p.mu.Unlock()
	if p.Ready == "" {
		return nil
	}
	return p.waitReady(ctx, timeout, done)
}

func (p *Process) waitReady(ctx context.Context, timeout time.Duration, done chan struct{}) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("%s exited before it was ready; see %s", p.Name, p.LogPath)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		resp, err := http.Get(p.Ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready at %s after %s; see %s", p.Name, p.Ready, timeout, p.LogPath)
}

// Kill sends SIGKILL, as kill -9 would, and waits for the process to exit.
func (p *Process) Kill() {
	if done := p.signal(syscall.SIGKILL); done != nil {
		<-done
	}
}

// Stop asks the process to shut down (SIGTERM) and kills it if it lingers.
func (p *Process) Stop() {
	done := p.signal(syscall.SIGTERM)
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.Kill()
	}
}

// signal sends sig to the process group and returns the channel closed when
// the process exits; nil when it never started.
func (p *Process) signal(sig syscall.Signal) chan struct{} {
	p.mu.Lock()
	pid, done := p.pid, p.done
	p.mu.Unlock()
	if pid == 0 {
		return nil
	}
	_ = syscall.Kill(-pid, sig)
	return done
}

// Running says whether the process was started and has not exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// CPUTime is the CPU time the process has used so far (user and system,
// from /proc), for load runs that report where a phase's CPU went.
func (p *Process) CPUTime() (time.Duration, error) {
	p.mu.Lock()
	pid := p.pid
	p.mu.Unlock()
	if pid == 0 {
		return 0, fmt.Errorf("%s has not started", p.Name)
	}
	return CPUTime(pid)
}

// CPUTime is the CPU time process pid has used so far, user and system.
func CPUTime(pid int) (time.Duration, error) {
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return 0, err
	}
	stat, err := proc.Stat()
	if err != nil {
		return 0, err
	}
	return time.Duration(stat.CPUTime() * float64(time.Second)), nil
}
