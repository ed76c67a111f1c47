package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/sdk"
)

// hostileScript writes a shell script as a plugin executable and answers
// its path and digest.
func hostileScript(t *testing.T, body string) (string, []byte) {
	t.Helper()
	data := []byte("#!/bin/sh\n" + body)
	path := filepath.Join(t.TempDir(), "hostile")
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return path, sum[:]
}

// pidAlive reports whether pid is a live (not zombie) process.
func pidAlive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// A plugin that leaves a child holding its stdout and stderr (a helper
// process, a worker pool) must not hold up the host's stop: the process
// is gone, so Kill returns within its grace and the child goes with it.
func TestKillEndsChildHoldingOutput(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process groups checked through /proc")
	}
	conn, child := launchLeavingChild(t, "sleep 60 &")
	done := make(chan struct{})
	start := time.Now()
	go func() {
		conn.Kill(100 * time.Millisecond)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Kill did not return within 15s: a child of the plugin holds its output open")
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("Kill took %s", took)
	}
	for deadline := time.Now().Add(5 * time.Second); pidAlive(child); {
		if time.Now().After(deadline) {
			t.Fatal("the plugin's child outlived the plugin")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An executable replaced by a FIFO after discovery must be refused, not
// block the launch forever in open(2) waiting for a writer.
func TestLaunchRefusesFIFOExecutable(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no FIFOs")
	}
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o755); err != nil {
		t.Skip(err)
	}
	sum := make([]byte, sha256.Size)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Launch(ctx, LaunchOptions{Name: "fifo", Path: path, SHA256: sum, Dir: t.TempDir()})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("Launch = %v, want a refusal of the FIFO", err)
		}
	case <-time.After(5 * time.Second):
		// Unblock the open so the goroutine ends.
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("Launch blocked opening a FIFO executable")
	}
}

// TestLaunchSaysItCannotRun: an executable without the execute bit is
// refused once, in plain words: not as exec's "fork/exec PATH: ...", which
// repeats the path the error is labelled with (from an outside review).
func TestLaunchSaysItCannotRun(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("execute bits")
	}
	data := []byte("#!/bin/sh\nexit 0\n")
	path := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	_, err := Launch(t.Context(), LaunchOptions{Name: "plain", Path: path, SHA256: sum[:], Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "cannot be run: permission denied") ||
		strings.Contains(err.Error(), "fork/exec") || strings.Count(err.Error(), path) != 1 {
		t.Fatalf("Launch = %v, want it to say once that the file cannot be run", err)
	}
}

// A plugin's JSON log line cannot overwrite the host's own reserved keys
// (its timestamp, caller) in the host's JSON log.
func TestPluginLineCannotForgeHostKeys(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, JSONFormat: true, IncludeLocation: true, Level: hclog.Trace})
	o := &pluginOutput{log: log.Named("p")}
	o.Write([]byte(`{"@level":"info","@message":"hi","@timestamp":"1999-01-01 00:00:00","@caller":"host/main.go:1","@warn":"x"}` + "\n"))
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("host log %q: %v", buf.String(), err)
	}
	if ts, _ := got["@timestamp"].(string); ts == "1999-01-01 00:00:00" {
		t.Errorf("the plugin set the host's @timestamp: %s", buf.String())
	}
	if c, _ := got["@caller"].(string); c == "host/main.go:1" {
		t.Errorf("the plugin set the host's @caller: %s", buf.String())
	}
	if got["@warn"] != nil {
		t.Errorf("the plugin set the host's @warn: %s", buf.String())
	}
	if !strings.Contains(buf.String(), "1999-01-01 00:00:00") {
		t.Errorf("the plugin's own timestamp is no longer visible: %s", buf.String())
	}
}

// A child that left the plugin's process group (setsid) and holds its
// output cannot be killed with the plugin: the host's stop still ends
// within a bound instead of waiting for that output forever.
func TestKillIsBoundedWhenAnEscapedChildHoldsOutput(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("setsid")
	}
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("no setsid")
	}
	conn, _ := launchLeavingChild(t, "/usr/bin/setsid sleep 60 &")
	pid := conn.Pid()
	if pid == 0 {
		t.Fatal("no pid")
	}
	done := make(chan struct{})
	go func() {
		conn.Kill(100 * time.Millisecond)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Kill did not return within 20s: an escaped child of the plugin holds its output open")
	}
	if pidAlive(pid) {
		t.Fatal("Kill returned with the plugin process alive")
	}
}

// launchLeavingChild launches a plugin whose script first runs start (a
// command put in the background, holding the script's output) and then
// the plugin itself, and answers the connection and the child's pid; the
// child is killed at cleanup.
func launchLeavingChild(t *testing.T, start string) (*Conn, int) {
	t.Helper()
	stub, _, _ := stubExecutable(t)
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	path, sum := hostileScript(t, start+"\necho $! > "+pidFile+"\nexec "+stub+"\n")
	conn, err := Launch(t.Context(), LaunchOptions{Name: "hostile", Path: path, SHA256: sum, Dir: t.TempDir(), StartTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	// Through a pidfd, taken while the child runs: a SIGKILL to its pid
	// once it has gone could kill another test's process given the pid.
	if proc, err := os.FindProcess(child); err == nil {
		t.Cleanup(func() { _ = proc.Kill(); _ = proc.Release() })
	}
	return conn, child
}

// A plugin names the address the host connects to in its handshake. The
// host connects only to a socket in the directory it made for the process
// (or to loopback) and only with the plugin's own certificate: a plugin
// cannot point it at another machine, another process's socket or a
// server the system's CAs vouch for.
func TestLaunchRefusesHostileHandshake(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("unix sockets and sh")
	}
	stub, _, _ := stubExecutable(t)
	// Another process's socket, outside the plugin's directory: the
	// host must not even connect to it.
	other := filepath.Join(t.TempDir(), "other.sock")
	l, err := net.Listen("unix", other)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var connected atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			connected.Add(1)
			c.Close()
		}
	}()
	cases := []struct {
		name, script, want string
	}{
		{"remote TCP address", "echo '1|1|tcp|192.0.2.1:4000|grpc|'\nsleep 30\n", `names the address "192.0.2.1:4000", which is not on loopback`},
		{"socket outside its directory", "echo '1|1|unix|" + other + "|grpc|'\nsleep 30\n", "outside the directory the host made for it"},
		{"socket outside by dot-dot", "echo \"1|1|unix|$PLUGIN_UNIX_SOCKET_DIR/../" + filepath.Base(filepath.Dir(other)) + "/other.sock|grpc|\"\nsleep 30\n", "outside the directory the host made for it"},
		{"symlink in its directory", "ln -s " + other + " \"$PLUGIN_UNIX_SOCKET_DIR/p\"\necho \"1|1|unix|$PLUGIN_UNIX_SOCKET_DIR/p|grpc|\"\nsleep 30\n", "which is not a socket"},
		// The real plugin's handshake with its certificate cut off.
		{"no server certificate", stub + " | { read -r line; echo \"${line%|*}|\"; cat >/dev/null; }\n", "carries no server certificate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path, sum := hostileScript(t, c.script)
			conn, err := Launch(t.Context(), LaunchOptions{Name: "hostile", Path: path, SHA256: sum, Dir: t.TempDir(), StartTimeout: 10 * time.Second})
			if err == nil {
				conn.Kill(0)
				t.Fatal("launched")
			}
			if !errors.Is(err, sdk.ErrUnavailable) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Launch = %v, want a refusal saying %q", err, c.want)
			}
		})
	}
	if n := connected.Load(); n > 0 {
		t.Fatalf("the host connected %d times to a socket a plugin named outside its directory", n)
	}
}

// What a plugin writes to stdout instead of its handshake is reported for
// what it is: an over-long line is no exit, and terminal control
// sequences reach the host's error escaped.
func TestLaunchReportsStdoutJunk(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("sh")
	}
	cases := []struct {
		name, script, want, not string
	}{
		{"a line of megabytes, no newline", "head -c 2000000 /dev/zero | tr '\\0' x\nsleep 30\n", "a line of over 64 KiB to stdout", "exited"},
		{"terminal control sequences", "printf '\\033[2J\\033]0;owned\\007 hi\\n'\nsleep 30\n", `wrote "\\x1b[2J\\x1b]0;owned\\a hi" to stdout`, "\x1b"},
		{"invalid UTF-8", "printf '\\377\\376 hi\\n'\nsleep 30\n", `wrote "\\xff\\xfe hi" to stdout`, "\xff"},
		// A handshake line whose fields carry control sequences or are not
		// what they say: go-plugin's refusal quotes them as they are.
		{"a handshake naming an unknown network", "printf '1|1|udp|\\033[2Jx\\rFORGED|grpc|\\n'\nsleep 30\n", `unknown address type: \x1b[2Jx\rFORGED`, "\x1b"},
		{"a handshake naming an address without a port", "printf '1|1|tcp|\\033[2Jx|grpc|\\n'\nsleep 30\n", `address \x1b[2Jx: missing port`, "\x1b"},
		{"a handshake with a version that is no number", "printf '1|v\\033[2J|unix|/a|grpc|\\n'\nsleep 30\n", "a protocol version that is not a number", "strconv"},
		{"a handshake with a core version that is no number", "printf 'x|1|unix|/a|grpc|\\n'\nsleep 30\n", "a protocol version that is not a number", "strconv"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path, sum := hostileScript(t, c.script)
			conn, err := Launch(t.Context(), LaunchOptions{Name: "hostile", Path: path, SHA256: sum, Dir: t.TempDir(), StartTimeout: 10 * time.Second})
			if err == nil {
				conn.Kill(0)
				t.Fatal("launched")
			}
			if msg := err.Error(); !strings.Contains(msg, c.want) || strings.Contains(msg, c.not) {
				t.Fatalf("Launch = %v, want it to say %q and not %q", err, c.want, c.not)
			}
		})
	}
}

// A start that ends before the handshake says why: the process exited, or
// it was still starting when its start timeout ran out or its caller gave
// up (a slow start read "it exited before the handshake").
func TestLaunchSaysWhyAStartEnded(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("sh")
	}
	for _, tc := range []struct {
		name, script string
		timeout      time.Duration
		giveUp       time.Duration // 0: the caller waits
		want         string
	}{
		{"exits", "exit 3\n", 10 * time.Second, 0, "it exited before the handshake"},
		{"slow", "exec sleep 30\n", time.Second, 0, "no handshake within 1s"},
		{"given up", "exec sleep 30\n", 10 * time.Second, 500 * time.Millisecond, "when the start was given up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, sum := hostileScript(t, tc.script)
			ctx := t.Context()
			if tc.giveUp > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.giveUp)
				defer cancel()
			}
			_, err := Launch(ctx, LaunchOptions{Name: "slow", Path: path, SHA256: sum, Dir: t.TempDir(), StartTimeout: tc.timeout})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Launch = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// go-plugin names the logger it would parse a plugin's stderr with after
// the executable; a script named "stdio" must not get the host's logger
// there, whose JSON parser panics on a non-string "@message".
func TestPluginNamedStdioCannotPanicTheHost(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("sh")
	}
	data := []byte("#!/bin/sh\necho '{\"@level\":\"info\",\"@message\":{}}' >&2\nexit 3\n")
	path := filepath.Join(t.TempDir(), "stdio")
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	log := hclog.New(&hclog.LoggerOptions{Output: &bytes.Buffer{}, Level: hclog.Debug})
	_, err := Launch(t.Context(), LaunchOptions{Name: "p", Path: path, SHA256: sum[:], Dir: t.TempDir(), Logger: log})
	if err == nil || !strings.Contains(err.Error(), "it exited before the handshake") {
		t.Fatalf("Launch = %v, want it to say the plugin exited", err)
	}
}
