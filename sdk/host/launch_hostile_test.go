package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	return conn, child
}
