// Package checkout finds the quotakeeper checkout a tool runs in, and the
// control-plane binaries `make testbin` built there. The local test bed
// (make run, make load) and the test suites read the checkout's files (the
// CRDs, the chart, the samples) from it; they find it from the working
// directory, not from where they were compiled, so a binary built in one
// checkout works in another.
package checkout

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Module is the module path whose go.mod marks the checkout's root.
const Module = "github.com/quotakeeper/quotakeeper"

// RootEnv, when set, names the checkout's root instead.
const RootEnv = "QUOTAKEEPER_ROOT"

// Root returns the checkout's root: $QUOTAKEEPER_ROOT, else the nearest
// directory at or above the working directory whose go.mod declares Module.
func Root() (string, error) {
	if dir := os.Getenv(RootEnv); dir != "" {
		if !declaresModule(dir) {
			return "", fmt.Errorf("%s=%s: no go.mod of %s there", RootEnv, dir, Module)
		}
		return filepath.Abs(dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if declaresModule(dir) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("not inside a quotakeeper checkout (no go.mod of %s at or above %s): run from the checkout, or set %s", Module, wd, RootEnv)
		}
	}
}

func declaresModule(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == Module
		}
	}
	return false
}

// Testbin finds the directory holding kube-apiserver and etcd:
// $KUBEBUILDER_ASSETS (as envtest reads it), else the newest
// bin/testbin/k8s-* of the checkout.
func Testbin() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, requireBinaries(dir)
	}
	root, err := Root()
	if err != nil {
		return "", err
	}
	matches, _ := filepath.Glob(filepath.Join(root, "bin", "testbin", "k8s-*"))
	sort.Strings(matches)
	for i := len(matches) - 1; i >= 0; i-- {
		if requireBinaries(matches[i]) == nil {
			return matches[i], nil
		}
	}
	return "", errors.New("no kube-apiserver and etcd under bin/testbin: run 'make testbin' (or 'make test', which builds them)")
}

func requireBinaries(dir string) error {
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("%s missing in %s: run 'make testbin'", name, dir)
		}
	}
	return nil
}
