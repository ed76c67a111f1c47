package main

import (
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// limitFileSize sets the file-size limit (RLIMIT_FSIZE) of the running
// process pid to size bytes (0: none), as `ulimit -f` would have at its
// start: a write past it fails with EFBIG (Go ignores SIGXFSZ). It needs
// no privilege for a process of the same user, so these tests run
// everywhere.
func limitFileSize(t *testing.T, pid int, size uint64) {
	t.Helper()
	lim := syscall.Rlimit{Cur: size, Max: ^uint64(0)}
	if size == 0 {
		lim.Cur = ^uint64(0)
	}
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE, uintptr(unsafe.Pointer(&lim)), 0, 0, 0); errno != 0 {
		t.Fatalf("set the file-size limit of process %d: %v", pid, errno)
	}
}

// TestFileSizeLimitAnswersStorageFull: a write refused by a file-size
// limit (a quota is refused the same way: SQLite reports both as an I/O
// error with the system's errno) is the operator's storage problem, as a
// full disk is: a record write answers 507 storage_full saying "file too
// large" once, a turn still injects (its session's accounting held in
// memory), and once the limit is lifted writes succeed. They answered 500
// internal, the plugin's saying "file too large: file too large".
func TestFileSizeLimitAnswersStorageFull(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`))
	var stored []string
	for i := range 3 {
		stored = append(stored, remember(t, m, noteRecord(i))...)
	}
	pid := pluginPids(t, m)[0]
	for _, p := range []int{m.cmd.Process.Pid, pid} {
		limitFileSize(t, p, 1)
	}

	var out apiError
	code := m.do("POST", "/v1/records", map[string]any{"records": []any{noteRecord(100)}}, &out)
	if code != 507 || out.Error.Code != "storage_full" {
		t.Fatalf("a write past the file-size limit: status %d code %q, want 507 storage_full: %s", code, out.Error.Code, out.Error.Message)
	}
	if n := strings.Count(out.Error.Message, "file too large"); n != 1 {
		t.Fatalf("the answer says the file is too large %d times, want once: %s", n, out.Error.Message)
	}
	turn(t, m, "limited", "harbour crane")
	if now := pluginPids(t, m)[0]; now != pid {
		t.Fatalf("the plugin restarted under a file-size limit (pid %d, was %d)", now, pid)
	}
	checkReadable(t, m, stored)

	for _, p := range []int{m.cmd.Process.Pid, pid} {
		limitFileSize(t, p, 0)
	}
	stored = append(stored, remember(t, m, noteRecord(100))...)
	turn(t, m, "limited", "harbour crane")
	checkReadable(t, m, stored)
}

// TestBleveFailedPersistKeepsServing: a bleve write whose segment cannot
// be persisted (here a file-size limit, which the provider's free-space
// check cannot see; a quota is the same) is refused with storage_full and
// leaves the index as it was: reads keep being served by the same plugin
// process, writes succeed once the limit is lifted, and a restart opens
// cleanly. Scorch kept the failed batch in memory with its segment
// closed, and the next read or write crashed the plugin ("assignment to
// entry in nil map"), each one of them until a restart.
func TestBleveFailedPersistKeepsServing(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfig(t, providerDeployment("bleve", `{ dir = "bleve" }`))
	m, err := startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	var stored []string
	for i := range 3 {
		stored = append(stored, remember(t, m, noteRecord(i))...)
	}
	pid := pluginPids(t, m)[0]
	limitFileSize(t, pid, 1)
	for i := 100; i < 103; i++ {
		var out apiError
		if code := m.do("POST", "/v1/records", map[string]any{"records": []any{noteRecord(i)}}, &out); code != 507 || out.Error.Code != "storage_full" {
			t.Fatalf("a write past the file-size limit: status %d code %q, want 507 storage_full: %s\n%s", code, out.Error.Code, out.Error.Message, m.logs())
		}
		// Said once, not as scorch says it ("segment: …/000000000242.zap
		// persist err: write …/000000000242.zap: file too large").
		if msg := out.Error.Message; strings.Count(msg, "file too large") != 1 || strings.Contains(msg, ".zap") || strings.Contains(msg, "persist err") {
			t.Fatalf("the refusal says %q, want the problem once", msg)
		}
		checkReadable(t, m, stored)
	}
	if now := pluginPids(t, m)[0]; now != pid {
		t.Fatalf("the plugin restarted after a failed persist (pid %d, was %d)\n%s", now, pid, m.logs())
	}
	var recall recallAnswer
	if code := m.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"id": "ann"}, "query": "word101", "limit": 10}, &recall); code != 200 || len(recall.Hits) != 0 {
		t.Fatalf("recall of a refused write = %d with %d hits, want none", code, len(recall.Hits))
	}

	limitFileSize(t, pid, 0)
	stored = append(stored, remember(t, m, noteRecord(101))...)
	checkReadable(t, m, stored)
	m.stop()
	if m, err = startWithConfig(t, cfgPath, dataDir); err != nil {
		t.Fatal(err)
	}
	checkReadable(t, m, stored)
}
