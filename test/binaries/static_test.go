// Package binaries checks what the Makefile ships: the manager, quotactl, the
// kubectl plugin and Gatekeeper with the plugin are linked statically (they
// run on a distroless static base image, which has no libc or dynamic loader)
// and carry the version the Makefile sets.
package binaries

import (
	"debug/buildinfo"
	"debug/elf"
	byteorder "encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/quotakeeper/quotakeeper/test/testenv"
)

type binary struct {
	path    string   // under the repository root
	target  string   // the make target that builds it
	program string   // the name it prints with its version
	version []string // the arguments that print the version; nil: not checked by running it
}

// gatekeeper is only inspected, never built here (several minutes): make test
// builds it before the Go suites, as the end-to-end suite needs it too.
var binaries = []binary{
	{path: "bin/quotakeeper-manager", target: "manager", program: "quotakeeper-manager", version: []string{"--version"}},
	{path: "bin/quotactl", target: "quotactl", program: "quotactl", version: []string{"version"}},
	{path: "bin/kubectl-quota", target: "kubectl-quota", program: "kubectl-quota", version: []string{"--version"}},
	{path: "bin/gatekeeper", target: "gatekeeper"},
}

// TestShippedBinariesAreStaticAndVersioned reuses bin/ outputs when present
// (make test builds them first) and builds the manager, quotactl and the
// kubectl plugin with make when not, so it checks the Makefile's build, not
// one of its own.
func TestShippedBinariesAreStaticAndVersioned(t *testing.T) {
	if testing.Short() {
		t.Skip("inspects (and may build) the shipped binaries")
	}
	root := testenv.RepoRoot()
	for _, b := range binaries {
		t.Run(b.target, func(t *testing.T) {
			path := filepath.Join(root, b.path)
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				if b.version == nil {
					t.Fatalf("%s missing: run 'make %s' (make test builds it)", b.path, b.target)
				}
				if out, err := exec.Command("make", "-C", root, b.target).CombinedOutput(); err != nil {
					t.Fatalf("make %s: %v\n%s", b.target, err, out)
				}
			}
			assertStatic(t, path)
			assertBuildSettings(t, path, b.target)
			if b.version != nil {
				assertPrintsVersion(t, path, b.program, b.version...)
			}
		})
	}
}

// assertStatic fails when the ELF file asks for a dynamic loader (PT_INTERP)
// or names shared libraries (DT_NEEDED): either fails to start on a base
// image without libc.
func assertStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked (has a PT_INTERP program header): rebuild it with 'make' (CGO_ENABLED=0)", path)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v: rebuild it with 'make' (CGO_ENABLED=0)", path, libs)
	}
}

// assertBuildSettings reads the build settings the Go toolchain records in
// the binary: built without cgo, with -trimpath, with the version set at
// link time.
func assertBuildSettings(t *testing.T, path, target string) {
	t.Helper()
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" {
		t.Errorf("%s: built with CGO_ENABLED=%q, want 0: rebuild it with 'make %s'", path, settings["CGO_ENABLED"], target)
	}
	if settings["-trimpath"] != "true" {
		t.Errorf("%s: built without -trimpath (a release would carry this machine's paths): rm %s && make %s", path, path, target)
	}
	// -trimpath keeps -ldflags out of the build settings: the version is
	// read from the variable -X sets.
	if v, err := linkedVersion(path); err != nil || v == "" || v == "dev" {
		t.Errorf("%s: version.Version is %q (%v): the Makefile's -ldflags did not reach it; rebuild it with 'make %s'", path, v, err, target)
	}
}

// linkedVersion reads version.Version from a Go ELF binary of a 64-bit
// little-endian platform: the symbol's string header (data pointer,
// length), then the bytes it points at.
func linkedVersion(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return "", err
	}
	read := func(addr, n uint64) ([]byte, error) {
		for _, s := range f.Sections {
			if s.Type != elf.SHT_NOBITS && addr >= s.Addr && addr+n <= s.Addr+s.Size {
				b := make([]byte, n)
				_, err := s.ReadAt(b, int64(addr-s.Addr))
				return b, err
			}
		}
		return nil, fmt.Errorf("address %#x is in no section with data", addr)
	}
	for _, sym := range syms {
		if sym.Name != "github.com/quotakeeper/quotakeeper/internal/version.Version" {
			continue
		}
		header, err := read(sym.Value, 16)
		if err != nil {
			return "", err
		}
		value, err := read(byteorder.LittleEndian.Uint64(header[:8]), byteorder.LittleEndian.Uint64(header[8:]))
		return string(value), err
	}
	return "", errors.New("no symbol version.Version")
}

// assertPrintsVersion runs the binary (which also proves it starts) and
// wants one line, "<program> <version> (<go version>, <os>/<arch>)", with a
// version other than the "dev" of a build without the Makefile's flags.
func assertPrintsVersion(t *testing.T, path, program string, args ...string) {
	t.Helper()
	out, err := exec.Command(path, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", path, strings.Join(args, " "), err)
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(program) + ` (\S+) \(go\S+, linux/\w+\)\n$`)
	m := re.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("%s %s printed %q, want a line matching %s", path, strings.Join(args, " "), out, re)
	}
	if m[1] == "dev" {
		t.Errorf("%s prints version dev: the Makefile's -ldflags did not reach it", path)
	}
}
