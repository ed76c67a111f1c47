package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// mountTmpfs mounts a tmpfs of size bytes on dir (created if needed) and
// unmounts it when the test ends. Register it before starting memhost, so
// the cleanup runs after memhost has stopped.
func mountTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			t.Skipf("mounting a tmpfs is not permitted here (%v): the full-disk tests need root or CAP_SYS_ADMIN", err)
		}
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
}

// fillDisk writes a file in dir until the file system refuses more, and
// answers its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for size := len(chunk); size > 0; {
		if _, err := f.Write(chunk[:size]); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			size /= 2 // the last pages, in smaller pieces
		}
	}
	return path
}

// onEachTmpfsProvider runs test in a subtest per provider that keeps its
// data in data_dir (not postgres), with memhost started on it and its
// data directory on a 32 MiB tmpfs.
func onEachTmpfsProvider(t *testing.T, test func(t *testing.T, m *instance, cfgPath, dataDir string)) {
	for _, pc := range providerConfigs {
		if pc.env != nil {
			continue // a server-backed provider (postgres) keeps no data in data_dir
		}
		t.Run(pc.plugin, func(t *testing.T) {
			cfgPath, dataDir := writeConfig(t, providerDeployment(pc.plugin, pc.config))
			mountTmpfs(t, dataDir, 32<<20)
			m, err := startWithConfig(t, cfgPath, dataDir)
			if err != nil {
				t.Fatal(err)
			}
			test(t, m, cfgPath, dataDir)
		})
	}
}

// noteRecord is a realm record with a body large enough to need new pages.
func noteRecord(i int) map[string]any {
	return map[string]any{
		"scope": "realm", "kind": "fact",
		"title": fmt.Sprintf("disk note %d", i),
		"body":  fmt.Sprintf("note %d about the harbour crane %s", i, strings.Repeat(fmt.Sprintf("word%d ", i), 800)),
	}
}

// TestFullDiskAnswersStorageFull fills the file system under the data
// directory while memhost runs: writes answer 507 storage_full (never 500),
// the host and plugin stay up, what was stored stays readable, and once
// space is freed writes succeed again.
func TestFullDiskAnswersStorageFull(t *testing.T) {
	t.Parallel()
	onEachTmpfsProvider(t, func(t *testing.T, m *instance, cfgPath, dataDir string) {
		pid := pluginPids(t, m)[0]
		var stored []string
		for i := range 3 {
			stored = append(stored, remember(t, m, noteRecord(i))...)
		}
		filler := fillDisk(t, dataDir)

		var refused []int
		for i := 3; i < 200 && len(refused) < 3; i++ {
			var out struct {
				IDs []string `json:"ids"`
				apiError
			}
			switch code := m.do("POST", "/v1/records", map[string]any{"records": []any{noteRecord(i)}}, &out); code {
			case 200: // the store still had free pages of its own
				stored = append(stored, out.IDs...)
			case 507:
				if out.Error.Code != "storage_full" {
					t.Fatalf("write %d on a full disk: 507 with code %q, want storage_full: %s", i, out.Error.Code, out.Error.Message)
				}
				refused = append(refused, i)
			default:
				t.Fatalf("write %d on a full disk: status %d code %q: %s\n%s", i, code, out.Error.Code, out.Error.Message, m.logs())
			}
		}
		if len(refused) == 0 {
			t.Fatalf("197 writes on a full disk and none answered storage_full\n%s", m.logs())
		}
		if code := m.do("GET", "/healthz", nil, nil); code != 200 {
			t.Fatalf("/healthz on a full disk = %d", code)
		}
		if now := pluginPids(t, m)[0]; now != pid {
			t.Fatalf("the plugin restarted on a full disk (pid %d, was %d)", now, pid)
		}
		checkReadable(t, m, stored)

		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		// A refused write was not acknowledged; retried once there is
		// room it succeeds (writes are idempotent by content).
		for _, i := range refused {
			stored = append(stored, remember(t, m, noteRecord(i))...)
		}
		stored = append(stored, remember(t, m, noteRecord(1000))...)
		checkReadable(t, m, stored)
	})
}

// checkReadable gets each id and recalls the notes by their shared words.
func checkReadable(t *testing.T, m *instance, ids []string) {
	t.Helper()
	for _, id := range ids {
		if code := m.do("GET", "/v1/records/"+id, nil, nil); code != 200 {
			t.Fatalf("GET /v1/records/%s = %d\n%s", id, code, m.logs())
		}
	}
	found := map[string]bool{}
	var out recallAnswer
	if code := m.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"id": "ann"}, "query": "harbour crane", "limit": 100}, &out); code != 200 {
		t.Fatalf("POST /v1/recall = %d\n%s", code, m.logs())
	}
	for _, h := range out.Hits {
		found[h.Record.ID] = true
	}
	for _, id := range ids {
		if !found[id] {
			t.Fatalf("recall of harbour crane misses stored record %s (%d hits)", id, len(out.Hits))
		}
	}
}

// TestReadOnlyDataDirIsRefusedClearly starts memhost on a data directory
// whose file system was remounted read-only after records were stored: it
// refuses to start with a message naming the directory and the cause (not
// a plugin stack of SQLite codes), and the data is intact once the mount is
// writable again.
func TestReadOnlyDataDirIsRefusedClearly(t *testing.T) {
	t.Parallel()
	onEachTmpfsProvider(t, func(t *testing.T, m *instance, cfgPath, dataDir string) {
		ids := remember(t, m, noteRecord(1), noteRecord(2))
		m.stop()

		remount := func(flags uintptr) {
			t.Helper()
			if err := syscall.Mount("tmpfs", dataDir, "tmpfs", syscall.MS_REMOUNT|flags, ""); err != nil {
				t.Fatalf("remount %s: %v", dataDir, err)
			}
		}
		remount(syscall.MS_RDONLY)
		_, err := startWithConfig(t, cfgPath, dataDir)
		if err == nil {
			t.Fatal("memhost started on a read-only data directory")
		}
		if msg := err.Error(); !strings.Contains(msg, "data directory "+dataDir+" is read-only") {
			t.Fatalf("start on a read-only data directory does not say so:\n%s", msg)
		}

		remount(0)
		m, err = startWithConfig(t, cfgPath, dataDir)
		if err != nil {
			t.Fatal(err)
		}
		checkReadable(t, m, ids)
	})
}

// TestFullDiskInjectKeepsWorking: with the data directory's file system
// full, turns of a session still inject (the session's accounting held in
// memory), never the same record twice and never past the session budget;
// once space returns the accounting is written, so a restart still knows
// what the session was given.
func TestFullDiskInjectKeepsWorking(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfig(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+
		"coordinator {\n  session_budget_bytes = 2048\n  turn_budget_bytes = 1024\n}\n")
	mountTmpfs(t, dataDir, 32<<20)
	m, err := startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		remember(t, m, map[string]any{"scope": "identity:alice", "kind": "fact", "title": fmt.Sprintf("harbour crane %d", i),
			"body": fmt.Sprintf("The harbour crane number %d lifts %s", i, strings.Repeat("containers ", 20))})
	}
	filler := fillDisk(t, dataDir)
	seen := map[string]bool{}
	spent := 0
	for range 6 {
		var out turnAnswer
		if code := m.do("POST", "/v1/turns/inject", map[string]any{"identity": map[string]string{"id": "alice"}, "session": "full", "content": "harbour crane"}, &out); code != 200 {
			t.Fatalf("inject on a full disk = %d\n%s", code, m.logs())
		}
		for _, id := range out.RecordIDs {
			if seen[id] {
				t.Fatalf("record %s injected twice in one session on a full disk", id)
			}
			seen[id] = true
		}
		spent += out.Bytes
	}
	if len(seen) == 0 {
		t.Fatal("nothing injected on a full disk")
	}
	if spent > 2048 {
		t.Fatalf("%d bytes injected in a session whose budget is 2048", spent)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	turn(t, m, "other", "harbour crane") // a write with room flushes what was held
	m.stop()
	m, err = startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	after := turn(t, m, "full", "harbour crane")
	for _, id := range after.RecordIDs {
		if seen[id] {
			t.Fatalf("after a restart the session injected %s again: its full-disk accounting was lost", id)
		}
	}
}

// TestRestartOnAFullDisk: a host stopped cleanly and started again once
// its data directory's file system is full serves what it stored, and
// answers writes storage_full. The state database's WAL and shared-memory
// files were deleted at a clean stop, and a start could not create them
// again (the -shm needs 32 KiB), so the host did not start at all.
func TestRestartOnAFullDisk(t *testing.T) {
	t.Parallel()
	onEachTmpfsProvider(t, func(t *testing.T, m *instance, cfgPath, dataDir string) {
		var stored []string
		for i := range 3 {
			stored = append(stored, remember(t, m, noteRecord(i))...)
		}
		turn(t, m, "before", "harbour crane")
		m.stop()
		fillDisk(t, dataDir)
		m, err := startWithConfig(t, cfgPath, dataDir)
		if err != nil {
			t.Fatalf("a restart on a full disk: %v", err)
		}
		checkReadable(t, m, stored)
		var out apiError
		if code := m.do("POST", "/v1/records", map[string]any{"records": []any{noteRecord(1000)}}, &out); code != 507 || out.Error.Code != "storage_full" {
			t.Fatalf("a write after a restart on a full disk = %d %q, want 507 storage_full: %s", code, out.Error.Code, out.Error.Message)
		}
	})
}

// TestFullDiskImportAnswersStorageFull: an import on a full disk answers
// 507 storage_full, as a write does (an operator's problem, not a bug),
// says the problem once however many records the batch holds, stores
// none of the batch, and succeeds once space is freed.
func TestFullDiskImportAnswersStorageFull(t *testing.T) {
	t.Parallel()
	onEachTmpfsProvider(t, func(t *testing.T, m *instance, cfgPath, dataDir string) {
		var recs []sdk.Record
		for i := range 40 {
			r := archiveLine(i, sdk.StatusActive)
			r.Supersedes = ""
			r.Body = fmt.Sprintf("record %d %s", i, strings.Repeat("harbour crane ", 4000))
			r.ContentHash = sdk.ContentHash(r.Title, r.Body)
			recs = append(recs, r)
		}
		filler := fillDisk(t, dataDir)
		var out struct {
			Imported int `json:"imported"`
			apiError
		}
		code := m.do("POST", "/v1/import", map[string]any{"records": recs}, &out)
		if code != 507 || out.Error.Code != "storage_full" {
			t.Fatalf("import on a full disk: status %d code %q, want 507 storage_full: %s", code, out.Error.Code, out.Error.Message)
		}
		if n := strings.Count(out.Error.Message, "no space left"); n > 1 {
			t.Fatalf("the answer says the disk is full %d times, want once: %s", n, out.Error.Message)
		}
		for _, r := range recs {
			if code := m.do("GET", "/v1/records/"+r.ID, nil, nil); code != 404 {
				t.Fatalf("GET %s after a refused import = %d, want 404", r.ID, code)
			}
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		if code := m.do("POST", "/v1/import", map[string]any{"records": recs}, &out); code != 200 || out.Imported != len(recs) {
			t.Fatalf("import once space is freed: status %d, %d imported, want %d: %s", code, out.Imported, len(recs), out.Error.Message)
		}
	})
}
