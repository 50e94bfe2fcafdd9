package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"sigs.k8s.io/yaml"
)

// The release check: `make release-test` builds a release and runs these
// against it (-release.dir); without the flag they skip, so `make test`'s
// `go test ./...` of this module does not build a release.
var (
	releaseDir     = flag.String("release.dir", "", "a directory make release wrote (empty: the release tests skip)")
	releaseVersion = flag.String("release.version", "", "the VERSION it was built with")
	releaseURL     = flag.String("release.url", "", "the RELEASE_URL it was built with (the krew manifest's download base)")
)

// What make release ships (the Makefile's RELEASE_IMAGE_PLATFORMS and
// RELEASE_CLI_PLATFORMS).
var (
	releaseImages        = []string{"gatekeeper-quotakeeper", "quotakeeper-manager"}
	releaseImagePlatform = []string{"linux/amd64", "linux/arm64"}
	releaseCLIs          = []string{"kubectl-quota", "quotactl"}
	releaseCLIPlatforms  = []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64"}
)

// The modules an SBOM must list besides the binary's own graph: what
// issue 25 names, so a generator that listed nothing would fail twice.
var sbomMust = map[string][]string{
	"gatekeeper-quotakeeper": {"github.com/open-policy-agent/gatekeeper/v3", "github.com/quotakeeper/quotakeeper", "github.com/open-policy-agent/opa"},
	"quotakeeper-manager":    {"github.com/open-policy-agent/gatekeeper/v3", "sigs.k8s.io/controller-runtime", "k8s.io/client-go"},
	"kubectl-quota":          {"k8s.io/client-go"},
	"quotactl":               {"k8s.io/client-go", "github.com/open-policy-agent/opa"},
}

func releaseOrSkip(t *testing.T) string {
	t.Helper()
	if *releaseDir == "" {
		t.Skip("no -release.dir: run make release-test")
	}
	if *releaseVersion == "" || *releaseURL == "" {
		t.Fatal("-release.dir needs -release.version and -release.url")
	}
	return *releaseDir
}

func artifact(kind, os, arch string) string {
	return fmt.Sprintf("%s_%s_%s_%s", kind, *releaseVersion, os, arch)
}

// Each image is a valid OCI layout (every blob's digest and size, every
// manifest's platform: go-containerregistry's validate) tagged with the
// version, holding an image index of exactly linux/amd64 and linux/arm64,
// whose /manager is a static binary of that architecture carrying the
// version; its SBOM lists that binary's module graph.
func TestReleaseImages(t *testing.T) {
	dir := releaseOrSkip(t)
	for _, name := range releaseImages {
		t.Run(name, func(t *testing.T) {
			idx, err := layout.ImageIndexFromPath(filepath.Join(dir, "images", name))
			if err != nil {
				t.Fatal(err)
			}
			top, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			if len(top.Manifests) != 1 || !top.Manifests[0].MediaType.IsIndex() || top.Manifests[0].Annotations[refNameAnnotation] != *releaseVersion {
				t.Fatalf("index.json %+v, want one image index tagged %s", top.Manifests, *releaseVersion)
			}
			platforms, err := idx.ImageIndex(top.Manifests[0].Digest)
			if err != nil {
				t.Fatal(err)
			}
			if err := validate.Index(platforms); err != nil {
				t.Fatalf("invalid image index: %v", err)
			}
			m, err := platforms.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range m.Manifests {
				got = append(got, d.Platform.String())
				img, err := platforms.Image(d.Digest)
				if err != nil {
					t.Fatal(err)
				}
				files, err := readFiles(img, binaryPath)
				if err != nil {
					t.Fatal(err)
				}
				bin := files[binaryPath].body
				arch, err := checkStatic(bin)
				if err != nil || arch != d.Platform.Architecture {
					t.Errorf("%s: /manager is for %q (%v), want %s", d.Platform, arch, err, d.Platform.Architecture)
				}
				info := requireStamped(t, d.Platform.String()+" /manager", bin, "linux", d.Platform.Architecture)
				requireSBOM(t, filepath.Join(dir, artifact(name, "linux", d.Platform.Architecture)+".cdx.json"), info, sbomMust[name])
			}
			if !slices.Equal(got, releaseImagePlatform) {
				t.Errorf("platforms %v, want %v", got, releaseImagePlatform)
			}
		})
	}
}

// SHA256SUMS lists every file of the release page, each with its digest.
func TestReleaseChecksums(t *testing.T) {
	dir := releaseOrSkip(t)
	f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not '<sha256>  <file>'", sc.Text())
		}
		listed[file] = true
		if got := fileSHA256(t, filepath.Join(dir, file)); got != sum {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %s", file, got, sum)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != "SHA256SUMS" && !listed[e.Name()] {
			t.Errorf("%s is not in SHA256SUMS", e.Name())
		}
	}
	for _, cli := range releaseCLIs {
		for _, p := range releaseCLIPlatforms {
			os, arch, _ := strings.Cut(p, "/")
			if name := artifact(cli, os, arch) + ".tar.gz"; !listed[name] {
				t.Errorf("%s missing from SHA256SUMS", name)
			}
		}
	}
}

// Each CLI archive holds the binary and LICENSE; the binary is built for
// its platform without cgo, with -trimpath and the version; on this
// machine's platform it runs and prints the version; its SBOM lists its
// module graph.
func TestReleaseCLIArchives(t *testing.T) {
	dir := releaseOrSkip(t)
	for _, cli := range releaseCLIs {
		for _, p := range releaseCLIPlatforms {
			goos, arch, _ := strings.Cut(p, "/")
			base := artifact(cli, goos, arch)
			t.Run(base, func(t *testing.T) {
				files := readTarGz(t, filepath.Join(dir, base+".tar.gz"))
				var names []string
				for n := range files {
					names = append(names, n)
				}
				sort.Strings(names)
				if want := []string{"LICENSE", cli}; !slices.Equal(names, want) {
					t.Fatalf("archive holds %v, want %v", names, want)
				}
				if files[cli].mode&0o111 != 0o111 {
					t.Errorf("%s has mode %o, want executable", cli, files[cli].mode)
				}
				info := requireStamped(t, cli, files[cli].body, goos, arch)
				requireSBOM(t, filepath.Join(dir, base+".cdx.json"), info, sbomMust[cli])
				if goos == runtime.GOOS && arch == runtime.GOARCH {
					requireRunsWithVersion(t, cli, files[cli].body)
				}
			})
		}
	}
}

// The krew manifest installs `kubectl quota` from the archives: one
// platform per archive, its URI the release's download URL of that
// archive, its sha256 the archive's.
func TestReleaseKrewManifest(t *testing.T) {
	dir := releaseOrSkip(t)
	data, err := os.ReadFile(filepath.Join(dir, "krew-quota.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var plugin struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version          string `json:"version"`
			Homepage         string `json:"homepage"`
			ShortDescription string `json:"shortDescription"`
			Description      string `json:"description"`
			Platforms        []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
				Files  []struct {
					From string `json:"from"`
					To   string `json:"to"`
				} `json:"files"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(data, &plugin); err != nil {
		t.Fatal(err)
	}
	if plugin.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || plugin.Kind != "Plugin" || plugin.Metadata.Name != "quota" ||
		plugin.Spec.Version != *releaseVersion || plugin.Spec.ShortDescription == "" {
		t.Errorf("manifest header %s %s %s version %s, want a krew v1alpha2 Plugin quota at %s", plugin.APIVersion, plugin.Kind, plugin.Metadata.Name, plugin.Spec.Version, *releaseVersion)
	}
	var got []string
	for _, p := range plugin.Spec.Platforms {
		goos, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		got = append(got, goos+"/"+arch)
		archive := artifact("kubectl-quota", goos, arch) + ".tar.gz"
		if want := strings.TrimSuffix(*releaseURL, "/") + "/" + archive; p.URI != want {
			t.Errorf("%s/%s: uri %s, want %s", goos, arch, p.URI, want)
		}
		if want := fileSHA256(t, filepath.Join(dir, archive)); p.SHA256 != want {
			t.Errorf("%s/%s: sha256 %s, want the archive's %s", goos, arch, p.SHA256, want)
		}
		files := readTarGz(t, filepath.Join(dir, archive))
		if _, ok := files[p.Bin]; !ok || p.Bin != "kubectl-quota" {
			t.Errorf("%s/%s: bin %q, not kubectl-quota in the archive", goos, arch, p.Bin)
		}
		for _, f := range p.Files {
			if _, ok := files[f.From]; !ok {
				t.Errorf("%s/%s: files from %q, which the archive lacks", goos, arch, f.From)
			}
		}
	}
	if !slices.Equal(got, []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}) {
		t.Errorf("platforms %v, want linux and darwin on amd64 and arm64", got)
	}
}

// The chart is packaged with the release's versions; the CRDs file holds
// every CRD of config/crd; the notes are CHANGELOG.md's section.
func TestReleaseChartCRDsAndNotes(t *testing.T) {
	dir := releaseOrSkip(t)
	chartVersion := strings.TrimPrefix(*releaseVersion, "v")
	files := readTarGz(t, filepath.Join(dir, "quotakeeper-"+chartVersion+".tgz"))
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(files["quotakeeper/Chart.yaml"].body, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Version != chartVersion || chart.AppVersion != *releaseVersion {
		t.Errorf("Chart.yaml version %q appVersion %q, want %q and %q", chart.Version, chart.AppVersion, chartVersion, *releaseVersion)
	}
	for _, f := range []string{"quotakeeper/values.schema.json", "quotakeeper/templates/crds.yaml", "quotakeeper/templates/uninstall.yaml"} {
		if _, ok := files[f]; !ok {
			t.Errorf("the chart package lacks %s", f)
		}
	}

	root := filepath.Join("..", "..", "..")
	data, err := os.ReadFile(filepath.Join(dir, "quotakeeper-crds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var crd struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &crd); err != nil {
			t.Fatal(err)
		}
		if crd.Kind == "CustomResourceDefinition" {
			got = append(got, crd.Metadata.Name)
		}
	}
	sources, err := filepath.Glob(filepath.Join(root, "config", "crd", "quota.miloapis.com_*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range sources {
		b := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(s), "quota.miloapis.com_"), ".yaml")
		want = append(want, b+".quota.miloapis.com")
	}
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("quotakeeper-crds.yaml holds %v, want config/crd's %v", got, want)
	}

	notes, err := os.ReadFile(filepath.Join(dir, "RELEASE_NOTES.md"))
	if err != nil {
		t.Fatal(err)
	}
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := changelogSection(string(changelog), chartVersion)
	if section == "" && strings.Contains(chartVersion, "-") {
		section = changelogSection(string(changelog), "Unreleased")
	}
	if section == "" || string(notes) != section+"\n" {
		t.Errorf("RELEASE_NOTES.md is\n%s\nwant CHANGELOG.md's section for %s:\n%s", notes, chartVersion, section)
	}
}

// changelogSection is the body of "## [version]" up to the next "## [",
// without leading or trailing blank lines.
func changelogSection(changelog, version string) string {
	_, rest, ok := strings.Cut(changelog, "\n## ["+version+"]")
	if !ok {
		return ""
	}
	_, body, _ := strings.Cut(rest, "\n")
	if i := strings.Index(body, "\n## ["); i >= 0 {
		body = body[:i]
	}
	return strings.Trim(body, "\n")
}

// requireStamped reads the Go build information of a binary (for any
// platform) and wants it built for goos/arch, without cgo, with -trimpath
// and the release version linked in; it returns the information.
func requireStamped(t *testing.T, what string, bin []byte, goos, arch string) *buildinfo.BuildInfo {
	t.Helper()
	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for key, want := range map[string]string{"GOOS": goos, "GOARCH": arch, "CGO_ENABLED": "0", "-trimpath": "true"} {
		if settings[key] != want {
			t.Errorf("%s: build setting %s=%q, want %q", what, key, settings[key], want)
		}
	}
	// -trimpath keeps -ldflags out of the build settings; the version is
	// read from the linked variable instead.
	if got, err := linkedVersion(bin); err != nil || got != *releaseVersion {
		t.Errorf("%s: version.Version is %q (%v), want %q", what, got, err, *releaseVersion)
	}
	return info
}

// versionSymbol is the variable -ldflags -X sets.
const versionSymbol = "github.com/quotakeeper/quotakeeper/internal/version.Version"

// linkedVersion reads version.Version from an ELF or Mach-O Go binary of a
// 64-bit little-endian platform: the symbol's string header (data pointer,
// length) and the bytes it points at, as the binary would print them.
func linkedVersion(bin []byte) (string, error) {
	type section struct {
		addr, size uint64
		data       func() ([]byte, error)
	}
	var sections []section
	var symbol uint64
	if f, err := elf.NewFile(bytes.NewReader(bin)); err == nil {
		syms, err := f.Symbols()
		if err != nil {
			return "", err
		}
		for _, sym := range syms {
			if sym.Name == versionSymbol {
				symbol = sym.Value
			}
		}
		for _, s := range f.Sections {
			if s.Type != elf.SHT_NOBITS {
				sections = append(sections, section{s.Addr, s.Size, s.Data})
			}
		}
	} else if f, err := macho.NewFile(bytes.NewReader(bin)); err == nil {
		if f.Symtab == nil {
			return "", errors.New("no symbol table")
		}
		for _, sym := range f.Symtab.Syms {
			if sym.Name == "_"+versionSymbol || sym.Name == versionSymbol {
				symbol = sym.Value
			}
		}
		for _, s := range f.Sections {
			sections = append(sections, section{s.Addr, s.Size, s.Data})
		}
	} else {
		return "", errors.New("neither ELF nor Mach-O")
	}
	if symbol == 0 {
		return "", fmt.Errorf("no symbol %s", versionSymbol)
	}
	read := func(addr, n uint64) ([]byte, error) {
		for _, s := range sections {
			if addr >= s.addr && addr+n <= s.addr+s.size {
				data, err := s.data()
				if err != nil {
					return nil, err
				}
				return data[addr-s.addr : addr-s.addr+n], nil
			}
		}
		return nil, fmt.Errorf("address %#x not in a section with data", addr)
	}
	header, err := read(symbol, 16)
	if err != nil {
		return "", err
	}
	value, err := read(binary.LittleEndian.Uint64(header[:8]), binary.LittleEndian.Uint64(header[8:]))
	return string(value), err
}

// requireSBOM wants a CycloneDX JSON SBOM whose main component is the
// binary's main module (at the release version, or at Gatekeeper's for
// Gatekeeper's build, whose main module it is), listing every module the
// binary links (its build information's dependencies, at their versions)
// and the modules in must, each with the binary's platform in its purl.
func requireSBOM(t *testing.T, path string, info *buildinfo.BuildInfo, must []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct {
				Name    string `json:"name"`
				Version string `json:"version"`
				PURL    string `json:"purl"`
			} `json:"component"`
		} `json:"metadata"`
		Components []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
			PURL    string `json:"purl"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &bom); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if bom.BOMFormat != "CycloneDX" {
		t.Fatalf("%s: bomFormat %q, want CycloneDX", path, bom.BOMFormat)
	}
	main := bom.Metadata.Component
	wantMain := *releaseVersion
	if v := info.Main.Version; v != "" && v != "(devel)" {
		wantMain = v
	}
	if main.Name != info.Main.Path || main.Version != wantMain {
		t.Errorf("%s: main component %s@%s, want %s@%s", filepath.Base(path), main.Name, main.Version, info.Main.Path, wantMain)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	platform := "goarch=" + settings["GOARCH"] + "&goos=" + settings["GOOS"] + "&"
	listed := map[string]string{main.Name: main.Version}
	purls := []string{main.PURL}
	for _, c := range bom.Components {
		listed[c.Name] = c.Version
		purls = append(purls, c.PURL)
	}
	for _, purl := range purls {
		if !strings.Contains(purl, platform) {
			t.Errorf("%s: purl %s lacks the binary's platform %s", filepath.Base(path), purl, platform)
			break
		}
	}
	for _, dep := range info.Deps {
		mod := dep
		if dep.Replace != nil {
			mod = dep.Replace
		}
		want := []string{mod.Version, dep.Version}
		if dep.Replace != nil && dep.Replace.Version == "(devel)" {
			// Replaced by a directory of the checkout (the API module):
			// a module of this release, at its version.
			want = []string{*releaseVersion}
		}
		if v, ok := listed[dep.Path]; !ok || !slices.Contains(want, v) {
			t.Errorf("%s: lists %s at %q, want %s (the binary links it)", filepath.Base(path), dep.Path, v, want[0])
		}
	}
	for _, m := range must {
		if _, ok := listed[m]; !ok {
			t.Errorf("%s lacks %s", filepath.Base(path), m)
		}
	}
	if len(info.Deps) < 10 {
		t.Errorf("%s: the binary links %d modules; a release binary links dozens", filepath.Base(path), len(info.Deps))
	}
}

// requireRunsWithVersion runs a binary of this machine's platform and
// wants "<cli> <version> (go..., os/arch)".
func requireRunsWithVersion(t *testing.T, cli string, bin []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), cli)
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	arg := map[string]string{"kubectl-quota": "--version", "quotactl": "version"}[cli]
	out, err := exec.Command(path, arg).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", cli, arg, err)
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(cli+" "+*releaseVersion) + ` \(go\S+, ` + runtime.GOOS + `/` + runtime.GOARCH + `\)\n$`)
	if !re.Match(out) {
		t.Errorf("%s %s printed %q, want a match of %s", cli, arg, out, re)
	}
}

type archived struct {
	mode int64
	body []byte
}

func readTarGz(t *testing.T, path string) map[string]archived {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	files := map[string]archived{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(h.Name, "./")] = archived{mode: h.Mode, body: body}
	}
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
