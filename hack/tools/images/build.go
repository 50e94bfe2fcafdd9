package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What Gatekeeper's Dockerfile and chart expect of its image, and what
// config/manager/manager.yaml expects of the manager's: the binary at
// /manager run as the entrypoint (the chart sets `command: [/manager]`, the
// manager's Deployment only args), as the numeric nonroot user (the pods set
// runAsNonRoot), from /.
const (
	binaryPath = "manager" // /manager
	entrypoint = "/manager"
	imageUser  = "65532:65532"
	workingDir = "/"
	license    = "Apache-2.0"
)

// OCI annotation and label keys.
const (
	refNameAnnotation = "org.opencontainers.image.ref.name"
	labelSource       = "org.opencontainers.image.source"
	labelVersion      = "org.opencontainers.image.version"
	labelLicenses     = "org.opencontainers.image.licenses"
	labelTitle        = "org.opencontainers.image.title"
)

type buildOptions struct {
	name string // image name: _output/images/<name>/ and <name>.tar, tagged <name>:<version>
	// The static binaries copied to /manager, one per platform (the
	// platform is read from each binary). One binary: one image, in the
	// layout and in <name>.tar. Several (make release: linux/amd64 and
	// linux/arm64): an image index of one image per binary, in the layout
	// only (a docker-load tarball holds one platform).
	binaries []string
	version  string    // tag and org.opencontainers.image.version
	source   string    // org.opencontainers.image.source
	out      string    // output directory
	base     string    // an OCI layout holding the base image; empty: baseFiles on an empty image
	created  time.Time // the image's and its files' timestamps, fixed for reproducible digests
}

// build writes the image as an OCI layout (out/<name>/) tagged with the
// version, and for one binary a tarball that `docker load` reads
// (out/<name>.tar). For several binaries the layout's one entry is an image
// index whose descriptors name each image's platform, as a registry serves
// a multi-platform tag.
func build(o buildOptions) error {
	tag, err := name.NewTag(o.name + ":" + o.version)
	if err != nil {
		return fmt.Errorf("image reference %s:%s: %w", o.name, o.version, err)
	}
	if len(o.binaries) == 0 {
		return fmt.Errorf("no binary for image %s", o.name)
	}
	var adds []mutate.IndexAddendum
	for _, binary := range o.binaries {
		img, arch, err := o.image(binary)
		if err != nil {
			return err
		}
		for _, a := range adds {
			if a.Platform.Architecture == arch {
				return fmt.Errorf("two binaries for linux/%s: %s", arch, binary)
			}
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}

	dir := filepath.Join(o.out, o.name)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(o.out, o.name+".tar")); err != nil && !os.IsNotExist(err) {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	refName := layout.WithAnnotations(map[string]string{refNameAnnotation: o.version})
	if len(adds) > 1 {
		idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
		return p.AppendIndex(idx, refName)
	}
	if err := p.AppendImage(adds[0].Add.(v1.Image), refName); err != nil {
		return err
	}
	// The tarball is written from the layout's copy, whose layers are already
	// compressed: the binary is compressed once.
	written, _, err := layoutImage(dir)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(filepath.Join(o.out, o.name+".tar"), tag, written)
}

// image lays one binary on the base for its platform and returns the image
// with the binary's GOARCH.
func (o buildOptions) image(binary string) (v1.Image, string, error) {
	bin, arch, err := readStatic(binary)
	if err != nil {
		return nil, "", err
	}
	base, err := o.baseImage(arch)
	if err != nil {
		return nil, "", err
	}
	layerType, err := layerMediaType(base)
	if err != nil {
		return nil, "", err
	}
	binTar, err := tarEntries([]entry{{path: binaryPath, mode: 0o755, body: bin}}, o.created)
	if err != nil {
		return nil, "", err
	}
	binLayer, err := gzipLayer(binTar, layerType)
	if err != nil {
		return nil, "", err
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   binLayer,
		History: v1.History{Created: v1.Time{Time: o.created}, CreatedBy: "COPY " + filepath.Base(binary) + " /manager"},
	})
	if err != nil {
		return nil, "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, "", err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: o.created}
	cf.OS, cf.Architecture = "linux", arch
	cf.Config.Entrypoint = []string{entrypoint}
	cf.Config.Cmd = nil
	cf.Config.User = imageUser
	cf.Config.WorkingDir = workingDir
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	maps.Copy(cf.Config.Labels, map[string]string{
		labelSource:   o.source,
		labelVersion:  o.version,
		labelLicenses: license,
		labelTitle:    o.name,
	})
	img, err = mutate.ConfigFile(img, cf)
	return img, arch, err
}

// baseImage is the image the binary is laid on: the --base layout's image for
// the binary's platform, or an empty OCI image with baseFiles.
func (o buildOptions) baseImage(arch string) (v1.Image, error) {
	if o.base != "" {
		return platformImage(o.base, arch)
	}
	files, err := baseFiles()
	if err != nil {
		return nil, err
	}
	t, err := tarEntries(files, o.created)
	if err != nil {
		return nil, err
	}
	l, err := gzipLayer(t, types.OCILayer)
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	return mutate.Append(img, mutate.Addendum{
		Layer:   l,
		History: v1.History{Created: v1.Time{Time: o.created}, CreatedBy: "quotakeeper hack/tools/images: passwd, group, nsswitch.conf, CA roots, /home/nonroot, /tmp"},
	})
}

// platformImage finds the linux/<arch> image in an OCI layout, descending
// into nested indexes (`crane pull --format=oci` of a multi-platform tag
// writes one).
func platformImage(dir, arch string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("--base %s: %w", dir, err)
	}
	img, err := findImage(idx, arch)
	if err != nil {
		return nil, fmt.Errorf("--base %s: %w", dir, err)
	}
	return img, nil
}

func findImage(idx v1.ImageIndex, arch string) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		switch {
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			if img, err := findImage(child, arch); err == nil {
				return img, nil
			}
		case d.MediaType.IsImage():
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, err
			}
			cf, err := img.ConfigFile()
			if err != nil {
				return nil, err
			}
			if cf.OS == "linux" && cf.Architecture == arch {
				return img, nil
			}
		}
	}
	return nil, fmt.Errorf("no linux/%s image", arch)
}

// layoutImage reads back the one image of an OCI layout build wrote, with
// its descriptor in index.json (whose annotations hold the tag).
func layoutImage(dir string) (v1.Image, v1.Descriptor, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsImage() {
		return nil, v1.Descriptor{}, fmt.Errorf("%s: want one image in index.json, found %d manifests", dir, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	return img, m.Manifests[0], err
}

// layerMediaType matches the binary's layer to the base image's manifest
// format (a Docker manifest may not list OCI layers).
func layerMediaType(base v1.Image) (types.MediaType, error) {
	mt, err := base.MediaType()
	if err != nil {
		return "", err
	}
	if mt == types.DockerManifestSchema2 {
		return types.DockerLayer, nil
	}
	return types.OCILayer, nil
}

// gzipLayer compresses the tar stream once; go-containerregistry sees gzip
// and hashes it as is rather than compressing again.
func gzipLayer(uncompressed []byte, mt types.MediaType) (v1.Layer, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(uncompressed); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	compressed := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}, tarball.WithMediaType(mt))
}
