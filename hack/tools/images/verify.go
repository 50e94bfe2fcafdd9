package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// checkStatic fails when the ELF binary asks for a dynamic loader
// (PT_INTERP) or names shared libraries (DT_NEEDED): either fails to start on
// a base without libc. It returns the GOARCH the binary was built for.
func checkStatic(bin []byte) (string, error) {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return "", fmt.Errorf("not an ELF binary: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", errors.New("dynamically linked (has a PT_INTERP program header): build it with CGO_ENABLED=0")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return "", err
	}
	if len(libs) > 0 {
		return "", fmt.Errorf("needs shared libraries %v: build it with CGO_ENABLED=0", libs)
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	}
	return "", fmt.Errorf("built for machine %v, not amd64 or arm64", f.Machine)
}

// readStatic reads a binary that must be static (see checkStatic) and
// returns it with its GOARCH.
func readStatic(path string) ([]byte, string, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	arch, err := checkStatic(bin)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return bin, arch, nil
}

type verifyOptions struct {
	name     string // the image under dir: <dir>/<name>/ and <dir>/<name>.tar
	dir      string
	binaries []string // what /manager must be, one per platform (as build took them)
	version  string
}

// verify reads back what build wrote and checks what the charts rely on.
// The layout's one entry is tagged with the version; for one binary it is an
// image and <name>.tar holds the same image under <name>:<version>; for
// several it is an image index with exactly one image per binary, each
// descriptor naming the image's platform. Each image runs /manager as
// 65532:65532 from /, /manager is its platform's binary (same sha256),
// executable and static, nonroot exists and /tmp is writable. Every
// problem is reported.
func verify(o verifyOptions) error {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	layoutDir := filepath.Join(o.dir, o.name)
	idx, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		return err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if len(m.Manifests) != 1 {
		return fmt.Errorf("%s: want one entry in index.json, found %d", layoutDir, len(m.Manifests))
	}
	desc := m.Manifests[0]
	if tag := desc.Annotations[refNameAnnotation]; tag != o.version {
		fail("index.json: %s is %q, want %q", refNameAnnotation, tag, o.version)
	}
	switch {
	case len(o.binaries) == 1 && desc.MediaType.IsImage():
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return err
		}
		if err := verifyImage(img, o.binaries[0], o.version, fail); err != nil {
			return err
		}
		if err := sameInTarball(o, img.ConfigName); err != nil {
			fail("%v", err)
		}
	case len(o.binaries) > 1 && desc.MediaType.IsIndex():
		platforms, err := idx.ImageIndex(desc.Digest)
		if err != nil {
			return err
		}
		if err := verifyPlatforms(platforms, o, fail); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%s: index.json holds a %s, want %s for %d binaries", layoutDir, desc.MediaType,
			map[bool]string{true: "an image", false: "an image index"}[len(o.binaries) == 1], len(o.binaries))
	}
	if len(problems) > 0 {
		return fmt.Errorf("image %s:\n  %s", layoutDir, strings.Join(problems, "\n  "))
	}
	return nil
}

// verifyPlatforms checks a multi-platform index: one image per binary, each
// descriptor's platform that of its image's config and binary.
func verifyPlatforms(idx v1.ImageIndex, o verifyOptions, fail func(string, ...any)) error {
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if len(m.Manifests) != len(o.binaries) {
		fail("the image index holds %d manifests, want %d (one per binary)", len(m.Manifests), len(o.binaries))
	}
	byArch := map[string]v1.Descriptor{}
	for _, d := range m.Manifests {
		if d.Platform == nil || !d.MediaType.IsImage() {
			fail("the image index's manifest %s is a %s with platform %v, want an image with a platform", d.Digest, d.MediaType, d.Platform)
			continue
		}
		byArch[d.Platform.OS+"/"+d.Platform.Architecture] = d
	}
	for _, binary := range o.binaries {
		_, arch, err := readStatic(binary)
		if err != nil {
			return err
		}
		d, ok := byArch["linux/"+arch]
		if !ok {
			fail("the image index has no linux/%s image (for %s)", arch, binary)
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		if err := verifyImage(img, binary, o.version, func(format string, args ...any) {
			fail("linux/"+arch+": "+format, args...)
		}); err != nil {
			return err
		}
	}
	return nil
}

// verifyImage checks one platform's image against the binary that must be
// its /manager, reporting each departure through fail.
func verifyImage(img v1.Image, binary, version string, fail func(string, ...any)) error {
	want, wantArch, err := readStatic(binary)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{entrypoint}) {
		fail("entrypoint is %q, want [%q] (Gatekeeper's chart runs command /manager)", c.Entrypoint, entrypoint)
	}
	if len(c.Cmd) != 0 {
		fail("cmd is %q, want none (the manifests pass only args)", c.Cmd)
	}
	if c.User != imageUser {
		fail("user is %q, want %q (the pods set runAsNonRoot, which needs a numeric user)", c.User, imageUser)
	}
	if c.WorkingDir != workingDir {
		fail("working directory is %q, want %q", c.WorkingDir, workingDir)
	}
	if cf.OS != "linux" || cf.Architecture != wantArch {
		fail("platform is %s/%s, want linux/%s (the binary's)", cf.OS, cf.Architecture, wantArch)
	}
	for key, value := range map[string]string{labelVersion: version, labelLicenses: license} {
		if c.Labels[key] != value {
			fail("label %s is %q, want %q", key, c.Labels[key], value)
		}
	}
	if c.Labels[labelSource] == "" {
		fail("label %s is missing", labelSource)
	}

	files, err := readFiles(img, binaryPath, "etc/passwd", "tmp")
	if err != nil {
		return err
	}
	switch bin, ok := files[binaryPath]; {
	case !ok:
		fail("/manager is missing")
	case bin.Typeflag != tar.TypeReg:
		fail("/manager is not a regular file (type %q)", bin.Typeflag)
	default:
		if bin.Mode&0o111 != 0o111 {
			fail("/manager has mode %o, want it executable by every user", bin.Mode&0o7777)
		}
		if got, want := sha256.Sum256(bin.body), sha256.Sum256(want); got != want {
			fail("/manager has sha256 %x, want %x (%s's)", got, want, binary)
		}
		if _, err := checkStatic(bin.body); err != nil {
			fail("/manager: %v", err)
		}
	}
	if passwd, ok := files["etc/passwd"]; !ok || !strings.Contains("\n"+string(passwd.body), "\nnonroot:x:65532:65532:") {
		fail("/etc/passwd has no nonroot user 65532:65532")
	}
	if tmp, ok := files["tmp"]; !ok || tmp.Typeflag != tar.TypeDir || tmp.Mode&0o1777 != 0o1777 {
		fail("/tmp is missing or not a world-writable sticky directory")
	}
	return nil
}

// sameInTarball checks that <name>.tar holds <name>:<version> with the
// layout image's config (which names every layer by its diff ID).
func sameInTarball(o verifyOptions, configName func() (v1.Hash, error)) error {
	tag, err := name.NewTag(o.name + ":" + o.version)
	if err != nil {
		return err
	}
	path := filepath.Join(o.dir, o.name+".tar")
	timg, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	got, err := timg.ConfigName()
	if err != nil {
		return err
	}
	want, err := configName()
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%s: config %s, want the layout's %s", path, got, want)
	}
	return nil
}

type file struct {
	*tar.Header
	body []byte
}

// readFiles reads the named paths from the image's flattened filesystem
// (later layers win, whiteouts applied).
func readFiles(img v1.Image, paths ...string) (map[string]file, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	found := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return found, nil
		}
		if err != nil {
			return nil, err
		}
		p := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/"), "/")
		if !slices.Contains(paths, p) {
			continue
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		found[p] = file{Header: h, body: body}
	}
}
