// Command images builds quotakeeper's two server images without a container
// runtime (`make images`) and checks what it built (`make images` runs both):
//
//	images build  --name NAME --binary PATH [--binary PATH...] --version V --source URL --out DIR [--base OCI-LAYOUT]
//	images verify --name NAME --binary PATH [--binary PATH...] --version V --dir DIR
//
// build writes DIR/NAME/ (an OCI image layout) and DIR/NAME.tar (for `docker
// load`, `crane push` or `skopeo copy docker-archive:`), both tagged
// NAME:V, with the binary at /manager as the entrypoint, run as 65532:65532.
// With a --binary per architecture (make release: linux/amd64 and
// linux/arm64) the layout holds an image index of one image per platform,
// and no tarball is written (docker load takes one platform).
// The base is gcr.io/distroless/static:nonroot's few files written here
// (see baseFiles), or the image in --base, a local OCI layout (e.g.
// `crane pull --format=oci gcr.io/distroless/static:nonroot DIR` on a machine
// with registry access).
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: images build|verify [flags]")
	}
	fs := flag.NewFlagSet("images "+args[0], flag.ContinueOnError)
	imageName := fs.String("name", "", "image name (required): DIR/NAME/ and DIR/NAME.tar, tagged NAME:VERSION")
	var binaries binaryList
	fs.Var(&binaries, "binary", "a static Linux binary that becomes /manager (required); repeat it for a multi-platform image, one binary per architecture")
	version := fs.String("version", "", "the tag and org.opencontainers.image.version (required)")
	switch args[0] {
	case "build":
		source := fs.String("source", "", "org.opencontainers.image.source (required)")
		out := fs.String("out", "", "output directory (required)")
		base := fs.String("base", "", "an OCI image layout whose linux image for the binary's architecture is the base (e.g. gcr.io/distroless/static:nonroot); empty: the base files are written here")
		if err := parse(fs, args[1:], "name", "binary", "version", "source", "out"); err != nil {
			return err
		}
		created, err := sourceDateEpoch()
		if err != nil {
			return err
		}
		return build(buildOptions{name: *imageName, binaries: binaries, version: *version, source: *source, out: *out, base: *base, created: created})
	case "verify":
		dir := fs.String("dir", "", "the directory build wrote to (required)")
		if err := parse(fs, args[1:], "name", "binary", "version", "dir"); err != nil {
			return err
		}
		if err := verify(verifyOptions{name: *imageName, dir: *dir, binaries: binaries, version: *version}); err != nil {
			return err
		}
		fmt.Printf("image %s:%s: entrypoint /manager is %s, static; user 65532:65532\n", *imageName, *version, strings.Join(binaries, ", "))
		return nil
	}
	return fmt.Errorf("unknown command %q: want build or verify", args[0])
}

// binaryList is the repeated --binary flag.
type binaryList []string

func (b *binaryList) String() string { return strings.Join(*b, ",") }

func (b *binaryList) Set(v string) error {
	*b = append(*b, v)
	return nil
}

// parse parses the flags and fails on missing required ones or stray
// arguments.
func parse(fs *flag.FlagSet, args []string, required ...string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	for _, r := range required {
		if fs.Lookup(r).Value.String() == "" {
			return fmt.Errorf("%s: --%s is required", fs.Name(), r)
		}
	}
	return nil
}

// sourceDateEpoch is the images' timestamp: SOURCE_DATE_EPOCH (seconds) when
// set, else the Unix epoch, so the same binary gives the same image digest.
func sourceDateEpoch() (time.Time, error) {
	v := os.Getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	s, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", v, err)
	}
	return time.Unix(s, 0).UTC(), nil
}
