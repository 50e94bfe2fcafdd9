// Command pause is the sandbox ("pause") container of the real-node test bed
// (test/node, make node-e2e): it holds a pod's namespaces open until the
// runtime stops it. registry.k8s.io/pause cannot be pulled here, so the bed
// builds this one into an image with hack/tools/images and imports it into
// containerd, whose CRI plugin is configured to use it as the sandbox image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	// As the upstream pause does, reap the children a shared process
	// namespace hands to PID 1, so they do not linger as zombies.
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			return
		case <-children:
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
