package nodebed

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/distribution/reference"

	"github.com/quotakeeper/quotakeeper/internal/localcluster"
)

// containerd is the node's container runtime: its own root, state and
// socket under Dir, so it shares nothing with another containerd on the
// machine, runc's state included.
type containerd struct {
	process *localcluster.Process
	assets  string
	socket  string
	// runcRoot is where runc keeps its containers' state: Stop removes
	// what the kubelet left running from there.
	runcRoot string
}

// k8sNamespace is the containerd namespace the CRI plugin keeps the
// kubelet's images and containers in.
const k8sNamespace = "k8s.io"

// containerdConfig is containerd 2's configuration (version 3): the CRI
// plugin with runc (cgroupfs, as the kubelet's cgroupDriver), the sandbox
// image imported from our tarball, the CNI network of network.go, and
// network namespaces under the state directory rather than /var/run/netns.
// OOM scores are kept at or above containerd's own: lowering one (-998 for
// the sandbox, -997 for a Guaranteed pod) needs CAP_SYS_RESOURCE, which a
// root without it (a Firecracker guest's, this machine's) lacks, and runc
// then fails every sandbox ("failed to update /proc/self/oom_score_adj:
// Permission denied", reported as "can't get final child's PID from pipe").
const containerdConfig = `version = 3
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[4]q

[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[5]q]
    conf_dir = %[6]q
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %[7]q
        Root = %[8]q
        SystemdCgroup = false

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`

// startContainerd writes containerd's configuration and the CNI network,
// starts containerd and waits for its socket.
func startContainerd(ctx context.Context, opts Options, sandboxImage string) (*containerd, error) {
	dir := filepath.Join(opts.Dir, "containerd")
	c := &containerd{
		assets:   opts.Assets,
		socket:   filepath.Join(dir, "containerd.sock"),
		runcRoot: filepath.Join(dir, "runc"),
	}
	cniConf := filepath.Join(dir, "cni", "net.d")
	if err := writeCNIConfig(cniConf, filepath.Join(dir, "cni", "networks")); err != nil {
		return nil, err
	}
	if err := mkdirs(filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.runcRoot); err != nil {
		return nil, err
	}
	config := fmt.Sprintf(containerdConfig,
		filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.socket, sandboxImage,
		filepath.Join(opts.Assets, "cni"), cniConf, filepath.Join(opts.Assets, "runc"), c.runcRoot)
	configFile := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(configFile, []byte(config), 0o644); err != nil {
		return nil, err
	}
	c.process = &localcluster.Process{
		Name: "containerd",
		Path: filepath.Join(opts.Assets, "containerd"),
		Args: []string{"--config=" + configFile},
		// The shim containerd starts for each pod is found on PATH.
		Env:     []string{"PATH=" + opts.Assets + ":" + os.Getenv("PATH")},
		LogPath: filepath.Join(opts.Dir, "containerd.log"),
	}
	if err := c.process.Start(ctx, 0); err != nil {
		return nil, err
	}
	if err := c.waitSocket(ctx, time.Minute); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *containerd) waitSocket(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !c.process.Running() {
			return fmt.Errorf("containerd exited; see %s", c.process.LogPath)
		}
		if conn, err := net.Dial("unix", c.socket); err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("containerd's socket %s not there after %s; see %s", c.socket, timeout, c.process.LogPath)
}

// ctr runs containerd's CLI against this containerd, in the CRI's namespace.
func (c *containerd) ctr(ctx context.Context, args ...string) (string, error) {
	return c.ctrWithInput(ctx, nil, args...)
}

// ctrWithInput runs ctr with stdin read from in.
func (c *containerd) ctrWithInput(ctx context.Context, in io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.assets, "ctr"), append([]string{"--address", c.socket, "--namespace", k8sNamespace}, args...)...)
	cmd.Stdin = in
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// importImage imports an image (its image tagged ref) into the CRI's
// namespace, where the kubelet finds it without pulling, and pins it so
// that the kubelet's image garbage collection never removes it. A tarball
// is a docker-archive; a directory is an OCI image layout, streamed to ctr
// as the OCI archive it is the tree of, with the repository of ref (an OCI
// layout names only the tag) and this machine's platform (a release's
// layout holds an index of linux/amd64 and linux/arm64).
func (c *containerd) importImage(ctx context.Context, image, ref string) error {
	if info, err := os.Stat(image); err != nil {
		return err
	} else if info.IsDir() {
		named, err := reference.ParseNormalizedNamed(ref)
		if err != nil {
			return err
		}
		r, w := io.Pipe()
		go func() { w.CloseWithError(tarTree(w, image)) }()
		_, err = c.ctrWithInput(ctx, r, "images", "import", "--base-name", named.Name(), "--platform", "linux/"+runtime.GOARCH, "-")
		r.Close()
		if err != nil {
			return err
		}
	} else if _, err := c.ctr(ctx, "images", "import", image); err != nil {
		return err
	}
	_, err := c.ctr(ctx, "images", "label", ref, "io.cri-containerd.pinned=pinned")
	return err
}

// tarTree writes the files under dir as a tar stream, paths relative to dir.
func tarTree(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// imageReference is the reference an image is tagged with, fully
// qualified as containerd stores it (quotakeeper-manager:v1 is
// docker.io/library/quotakeeper-manager:v1): a docker-archive tarball's
// manifest.json RepoTags, or for an OCI image layout (a directory) its
// name and the tag its index gives (org.opencontainers.image.ref.name).
func imageReference(image string) (string, error) {
	if info, err := os.Stat(image); err == nil && info.IsDir() {
		return layoutReference(image)
	}
	f, err := os.Open(image)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("%s: no manifest.json (not a docker-archive tarball)", image)
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", image, err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var manifest []struct{ RepoTags []string }
		if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
			return "", fmt.Errorf("%s: manifest.json: %w", image, err)
		}
		if len(manifest) != 1 || len(manifest[0].RepoTags) != 1 {
			return "", fmt.Errorf("%s: want one image with one tag, got %+v", image, manifest)
		}
		return normalized(image, manifest[0].RepoTags[0])
	}
}

// layoutReference is an OCI image layout's reference: the directory's name
// (make release's images/<name>/) tagged with its one entry's ref.name.
func layoutReference(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return "", err
	}
	var index struct {
		Manifests []struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(data, &index); err != nil {
		return "", fmt.Errorf("%s: index.json: %w", dir, err)
	}
	if len(index.Manifests) != 1 || index.Manifests[0].Annotations[refNameAnnotation] == "" {
		return "", fmt.Errorf("%s: want one entry tagged with %s in index.json", dir, refNameAnnotation)
	}
	return normalized(dir, filepath.Base(dir)+":"+index.Manifests[0].Annotations[refNameAnnotation])
}

const refNameAnnotation = "org.opencontainers.image.ref.name"

func normalized(image, ref string) (string, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", fmt.Errorf("%s: %w", image, err)
	}
	return named.String(), nil
}

// removeContainers force-deletes every container runc still runs for this
// containerd: a stopped kubelet leaves its pods running.
func (c *containerd) removeContainers() {
	runc := filepath.Join(c.assets, "runc")
	root := filepath.Join(c.runcRoot, k8sNamespace)
	out, err := exec.Command(runc, "--root", root, "list", "-q").Output()
	if err != nil {
		return
	}
	for _, id := range strings.Fields(string(out)) {
		_ = exec.Command(runc, "--root", root, "delete", "--force", id).Run()
	}
}

// killShims kills the runc shims of this containerd, which outlive it by
// design: each is found by its executable and its -address flag.
func (c *containerd) killShims() {
	shim := filepath.Join(c.assets, "containerd-shim-runc-v2")
	if resolved, err := filepath.EvalSymlinks(shim); err == nil {
		shim = resolved
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || exe != shim {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(c.socket)) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
