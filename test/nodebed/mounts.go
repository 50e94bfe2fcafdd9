package nodebed

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/prometheus/procfs"
)

// unmountUnder detaches every mount below dir, deepest first: the pods'
// token volumes the kubelet mounted, containerd's overlay root filesystems
// and network namespaces. A stopped node leaves them, and dir cannot be
// removed while they are there.
func unmountUnder(dir string) {
	if dir == "" {
		return
	}
	mounts, err := procfs.GetMounts()
	if err != nil {
		return
	}
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	var points []string
	for _, m := range mounts {
		if strings.HasPrefix(m.MountPoint, prefix) {
			points = append(points, m.MountPoint)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// removeKubeletCgroups removes the kubepods hierarchy the kubelet made
// under each cgroup v1 controller (cgroupfs driver), deepest first; its
// pods are gone by then, so every directory is empty of processes.
func removeKubeletCgroups() {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			_ = syscall.Rmdir(d)
		}
	}
}
