package main

import (
	"debug/elf"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// staticBinary builds a small Go program the way the Makefile builds the
// servers (CGO_ENABLED=0) and returns its path.
func staticBinary(t *testing.T, dir, message string) string {
	t.Helper()
	return staticBinaryFor(t, dir, message, runtime.GOARCH)
}

// staticBinaryFor is staticBinary for linux/<arch>.
func staticBinaryFor(t *testing.T, dir, message, arch string) string {
	t.Helper()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(src, "go.mod"), "module example.com/server\n\ngo 1.26\n")
	write(t, filepath.Join(src, "main.go"), "package main\n\nfunc main() { println("+`"`+message+`"`+") }\n")
	out := filepath.Join(dir, "server")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func options(out, binary string) buildOptions {
	return buildOptions{
		name: "server", binaries: []string{binary}, version: "v1.2.3", out: out,
		source: "https://github.com/quotakeeper/quotakeeper", created: time.Unix(0, 0).UTC(),
	}
}

func verifyOf(o buildOptions) verifyOptions {
	return verifyOptions{name: o.name, dir: o.out, binaries: o.binaries, version: o.version}
}

// buildAndVerify builds the image, requires verify to pass and returns the
// image read back from its layout.
func buildAndVerify(t *testing.T, o buildOptions) v1.Image {
	t.Helper()
	if err := build(o); err != nil {
		t.Fatal(err)
	}
	if err := verify(verifyOf(o)); err != nil {
		t.Fatal(err)
	}
	img, _, err := layoutImage(filepath.Join(o.out, o.name))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestBuildWritesWhatTheChartsRun(t *testing.T) {
	dir := t.TempDir()
	o := options(filepath.Join(dir, "out"), staticBinary(t, dir, "one"))
	img := buildAndVerify(t, o)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.source":   "https://github.com/quotakeeper/quotakeeper",
		"org.opencontainers.image.version":  "v1.2.3",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.title":    "server",
	}
	if !maps.Equal(cf.Config.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", cf.Config.Labels, wantLabels)
	}
	files, err := readFiles(img, "etc/group", caBundlePath, "home/nonroot")
	if err != nil {
		t.Fatal(err)
	}
	if g := string(files["etc/group"].body); !strings.Contains(g, "\nnonroot:x:65532:\n") {
		t.Errorf("/etc/group is %q, want a nonroot group 65532", g)
	}
	if n := strings.Count(string(files[caBundlePath].body), "BEGIN CERTIFICATE"); n < 100 {
		t.Errorf("/%s holds %d certificates, want the NSS roots (over 100)", caBundlePath, n)
	}
	if h := files["home/nonroot"]; h.Header == nil || h.Uid != 65532 || h.Gid != 65532 {
		t.Errorf("/home/nonroot is %+v, want a directory owned by 65532:65532", h.Header)
	}

	// The same inputs give the same image: rebuilding changes no digest.
	first, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if err := build(o); err != nil {
		t.Fatal(err)
	}
	again, _, err := layoutImage(filepath.Join(o.out, o.name))
	if err != nil {
		t.Fatal(err)
	}
	if second, err := again.Digest(); err != nil || second != first {
		t.Errorf("rebuilt image digest %v (%v), want %v", second, err, first)
	}
}

func TestVerifyReportsEveryDeparture(t *testing.T) {
	dir := t.TempDir()
	o := options(filepath.Join(dir, "out"), staticBinary(t, dir, "one"))
	if err := build(o); err != nil {
		t.Fatal(err)
	}

	// Another binary than the one in the image.
	other := verifyOf(o)
	other.binaries = []string{staticBinary(t, filepath.Join(dir, "other"), "two")}
	err := verify(other)
	if err == nil || !strings.Contains(err.Error(), "/manager has sha256 ") {
		t.Errorf("verify against another binary: %v, want a sha256 mismatch", err)
	}

	// An image whose config no longer matches the charts: the layout is
	// rewritten with another entrypoint, a command, root, another directory
	// and another version; the tarball keeps the built image.
	layoutDir := filepath.Join(o.out, o.name)
	img, _, err := layoutImage(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.Entrypoint = []string{"/bin/manager"}
	cf.Config.Cmd = []string{"--help"}
	cf.Config.User = "0"
	cf.Config.WorkingDir = "/home"
	cf.Config.Labels[labelVersion] = "v0"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	// Written beside the layout first: the image reads its layers from it.
	p, err := layout.Write(layoutDir+".changed", empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: "v0"})); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(layoutDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(layoutDir+".changed", layoutDir); err != nil {
		t.Fatal(err)
	}
	err = verify(verifyOf(o))
	if err == nil {
		t.Fatal("verify passed a changed image")
	}
	for _, want := range []string{
		`index.json: org.opencontainers.image.ref.name is "v0", want "v1.2.3"`,
		`entrypoint is ["/bin/manager"], want ["/manager"]`,
		`cmd is ["--help"], want none`,
		`user is "0", want "65532:65532"`,
		`working directory is "/home", want "/"`,
		`label org.opencontainers.image.version is "v0", want "v1.2.3"`,
		`server.tar: config sha256:`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("verify error lacks %q:\n%v", want, err)
		}
	}
}

// A dynamically linked binary cannot run on the base (no libc, no loader):
// build refuses it.
func TestBuildRefusesDynamicBinaries(t *testing.T) {
	dynamic := ""
	for _, p := range []string{"/bin/true", "/usr/bin/true"} {
		if f, err := elf.Open(p); err == nil {
			interp := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
			_ = f.Close()
			if interp {
				dynamic = p
				break
			}
		}
	}
	if dynamic == "" {
		t.Skip("no dynamically linked /bin/true here")
	}
	dir := t.TempDir()
	err := build(options(dir, dynamic))
	if err == nil || !strings.Contains(err.Error(), "dynamically linked (has a PT_INTERP program header)") {
		t.Errorf("build of %s: %v, want a refusal", dynamic, err)
	}
	if _, statErr := os.Stat(filepath.Join(dir, "server")); !os.IsNotExist(statErr) {
		t.Errorf("build of a dynamic binary wrote output (%v)", statErr)
	}
}

// --base takes the binary's platform from a local OCI layout, also from an
// index within the index (as `crane pull --format=oci` writes a
// multi-platform tag), and keeps its layers and environment.
func TestBuildOnABaseLayout(t *testing.T) {
	dir := t.TempDir()
	bin := staticBinary(t, dir, "one")

	// A stand-in for distroless: the generated base with an environment,
	// next to an image for another platform, in a nested index.
	o := options(dir, bin)
	base, err := o.baseImage(runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := base.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Env = []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	if base, err = mutate.ConfigFile(base, cf); err != nil {
		t.Fatal(err)
	}
	other, err := mutate.ConfigFile(base, &v1.ConfigFile{OS: "linux", Architecture: "s390x"})
	if err != nil {
		t.Fatal(err)
	}
	inner := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: other, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "s390x"}}},
		mutate.IndexAddendum{Add: base, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}},
	)
	baseDir := filepath.Join(dir, "distroless")
	p, err := layout.Write(baseDir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(inner); err != nil {
		t.Fatal(err)
	}

	o.out = filepath.Join(dir, "out")
	o.base = baseDir
	img := buildAndVerify(t, o)
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	baseLayers, err := base.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != len(baseLayers)+1 {
		t.Errorf("image has %d layers, want the base's %d and the binary's", len(layers), len(baseLayers))
	}
	got, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Config.Env, cf.Config.Env) {
		t.Errorf("env %q, want the base's %q", got.Config.Env, cf.Config.Env)
	}
}

// make release builds each server image for linux/amd64 and linux/arm64:
// one layout whose entry is an image index of one image per binary, each
// descriptor naming its platform, reproducible, and checked per platform.
func TestBuildMultiPlatformIndex(t *testing.T) {
	dir := t.TempDir()
	amd64 := staticBinaryFor(t, filepath.Join(dir, "amd64"), "one", "amd64")
	arm64 := staticBinaryFor(t, filepath.Join(dir, "arm64"), "one", "arm64")
	o := options(filepath.Join(dir, "out"), amd64)
	o.binaries = []string{amd64, arm64}
	if err := build(o); err != nil {
		t.Fatal(err)
	}
	if err := verify(verifyOf(o)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(o.out, "server.tar")); !os.IsNotExist(err) {
		t.Errorf("a multi-platform build wrote server.tar (%v); docker load takes one platform", err)
	}
	idx, err := layout.ImageIndexFromPath(filepath.Join(o.out, o.name))
	if err != nil {
		t.Fatal(err)
	}
	top, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || !top.Manifests[0].MediaType.IsIndex() || top.Manifests[0].Annotations[refNameAnnotation] != "v1.2.3" {
		t.Fatalf("index.json is %+v, want one image index tagged v1.2.3", top.Manifests)
	}
	inner, err := idx.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := inner.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		platforms = append(platforms, d.Platform.String())
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("platforms %v, want %v", platforms, want)
	}

	// The same binaries give the same index digest.
	if err := build(o); err != nil {
		t.Fatal(err)
	}
	again, err := layout.ImageIndexFromPath(filepath.Join(o.out, o.name))
	if err != nil {
		t.Fatal(err)
	}
	if m2, err := again.IndexManifest(); err != nil || m2.Manifests[0].Digest != top.Manifests[0].Digest {
		t.Errorf("rebuilt index %v (%v), want %s", m2, err, top.Manifests[0].Digest)
	}

	// Checked against another arm64 binary, the arm64 image fails alone.
	other := verifyOf(o)
	other.binaries = []string{amd64, staticBinaryFor(t, filepath.Join(dir, "other"), "two", "arm64")}
	if err := verify(other); err == nil || !strings.Contains(err.Error(), "linux/arm64: /manager has sha256 ") || strings.Contains(err.Error(), "linux/amd64:") {
		t.Errorf("verify against another arm64 binary: %v, want one linux/arm64 sha256 mismatch", err)
	}
	// Checked against one binary, the index is not what was asked for.
	if err := verify(verifyOf(options(o.out, amd64))); err == nil || !strings.Contains(err.Error(), "want an image for 1 binaries") {
		t.Errorf("verify of the index against one binary: %v, want a refusal", err)
	}
	// Two binaries of one platform are refused.
	o.binaries = []string{amd64, amd64}
	if err := build(o); err == nil || !strings.Contains(err.Error(), "two binaries for linux/amd64") {
		t.Errorf("build with two amd64 binaries: %v, want a refusal", err)
	}
}
