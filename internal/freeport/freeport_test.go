package freeport

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// Ports come from below the ephemeral range, are never handed out twice,
// and can be listened on.
func TestGetReturnsDistinctFreePortsBelowTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		port, err := Get()
		if err != nil {
			t.Fatal(err)
		}
		if port < first || port >= below() {
			t.Fatalf("port %d outside [%d, %d)", port, first, below())
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("port %d: %v", port, err)
		}
		_ = l.Close()
	}
}

// A port another process has claimed is never handed out: the claim is a
// lock on a file named for the port, which the kernel holds for the
// claiming process (here a child, holding its lock while this one asks).
func TestGetSkipsAPortAnotherProcessClaimed(t *testing.T) {
	if os.Getenv("FREEPORT_HOLD") != "" {
		port, err := Get()
		if err != nil {
			os.Exit(1)
		}
		fmt.Println(port)
		time.Sleep(time.Minute) // killed by the parent
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGetSkipsAPortAnotherProcessClaimed$")
	cmd.Env = append(os.Environ(), "FREEPORT_HOLD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var held int
	if _, err := fmt.Fscan(out, &held); err != nil {
		t.Fatal(err)
	}
	if claim(held) {
		t.Fatalf("port %d claimed here while another process holds it", held)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if !claim(held) {
		t.Fatalf("port %d not claimable once the process holding it is gone", held)
	}
}
