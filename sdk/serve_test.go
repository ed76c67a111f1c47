package sdk

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
)

// The host watch polls four times a second for the plugin's life: each
// poll must give back what it opened (a pidfd on Linux), or an idle
// plugin holds hundreds of descriptors until a collection frees them.
func TestHostWatchHoldsNoDescriptors(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/self/fd")
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	open := func() int {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(fds)
	}
	before := open()
	for range 200 {
		if !running(os.Getpid()) {
			t.Fatal("this process reads as not running")
		}
	}
	if running(gone.Process.Pid) {
		t.Fatal("a reaped process reads as running")
	}
	if after := open(); after > before+5 {
		t.Fatalf("%d descriptors open after 200 polls, %d before", after, before)
	}
}
