package testbin

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a parent that starts a child with
// Command and waits forever, so the test can kill it as a timeout would.
const helperEnv = "TESTBIN_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "parent":
		child := Command("sleep", "600")
		if err := child.Start(); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(child.Process.Pid)
		select {}
	}
	os.Exit(Main(m))
}

// TestChildDiesWithKilledParent: a process started with Command does not
// outlive a test process killed with SIGKILL, which runs no cleanup.
func TestChildDiesWithKilledParent(t *testing.T) {
	parent := exec.Command(os.Args[0], "-test.run", "^$")
	parent.Env = append(os.Environ(), helperEnv+"=parent")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		parent.Process.Kill()
		t.Fatalf("helper: %v (%q)", err, line)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		parent.Process.Kill()
		t.Fatalf("helper answered %q", line)
	}
	// Whatever happens below, the child goes too: through a pidfd, so
	// never another test's process given its pid later.
	if proc, err := os.FindProcess(pid); err == nil {
		t.Cleanup(func() { _ = proc.Kill(); _ = proc.Release() })
	}
	if !running(pid) {
		t.Fatalf("child %d is not running before its parent is killed", pid)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	parent.Wait()
	// The kernel signals the child as the parent exits; the child is then
	// reaped by init. The wait is a bound, not a measured time.
	for deadline := time.Now().Add(30 * time.Second); running(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("child %d outlived its parent killed with SIGKILL", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running: the process exists and is no zombie.
func running(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
