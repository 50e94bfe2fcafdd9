package testenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Watchers is how many watches of a resource the kube-apiserver is serving
// now, from its apiserver_longrunning_requests gauge: a test's proof that an
// informer really stopped (its watch ended), not just that its handler went
// quiet. group is "" for the core group; resource is the plural.
func Watchers(ctx context.Context, cfg *rest.Config, group, resource string) (int, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("read apiserver metrics: %w", err)
	}
	want := []string{`verb="WATCH"`, fmt.Sprintf(`group="%s"`, group), fmt.Sprintf(`resource="%s"`, resource)}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") {
			continue
		}
		labels, value, ok := strings.Cut(line, "} ")
		if !ok || !containsAll(labels, want) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		n += int(v)
	}
	return n, sc.Err()
}

// WaitWatchers waits, up to timeout, until the kube-apiserver serves
// exactly want watches of the resource (see Watchers).
func WaitWatchers(ctx context.Context, t testing.TB, timeout time.Duration, cfg *rest.Config, group, resource string, want int) {
	t.Helper()
	Eventually(t, timeout, "watches of "+resource, func() error {
		n, err := Watchers(ctx, cfg, group, resource)
		if err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("%d watches of %s, want %d", n, resource, want)
		}
		return nil
	})
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
