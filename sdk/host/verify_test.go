package host

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"github.com/memhost/memhost/sdk"
)

// serveStubEnv makes this test binary serve stubProvider as a plugin
// process, so launches are tested on a real executable without a build.
const serveStubEnv = "MEMHOST_HOST_TEST_SERVE_STUB"

func TestMain(m *testing.M) {
	if os.Getenv(serveStubEnv) == "1" {
		if caps, ok := os.LookupEnv(serveCapsEnv); ok {
			sdk.Serve(capsPlugin{declared: splitCaps(caps)})
		} else {
			sdk.Serve(stubProvider{})
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type stubProvider struct{}

func (stubProvider) Info() sdk.Info {
	return sdk.Info{Name: "stub", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindProvider}, Protocols: []int{1}}
}
func (stubProvider) Configure(context.Context, json.RawMessage) error { return nil }
func (stubProvider) Recall(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) {
	return nil, nil
}

// stubExecutable copies this test binary into a fresh directory and
// answers its path, content and digest.
func stubExecutable(t *testing.T) (string, []byte, []byte) {
	t.Helper()
	t.Setenv(serveStubEnv, "1")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "stub")
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return path, data, sum[:]
}

// agedVerifier trusts every file's timestamps as settled: its clock runs
// an hour ahead, as if the executable had been installed long ago.
func agedVerifier() *Verifier {
	v := NewVerifier()
	v.now = func() time.Time { return time.Now().Add(time.Hour) }
	return v
}

func launchStub(t *testing.T, v *Verifier, path string, sum []byte) (*Conn, error) {
	t.Helper()
	conn, err := Launch(t.Context(), LaunchOptions{Name: "stub", Path: path, SHA256: sum, Verifier: v, Dir: t.TempDir()})
	if err == nil {
		t.Cleanup(func() { conn.Kill(0) })
	}
	return conn, err
}

func identityOf(t *testing.T, path string) fileID {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := identity(fi)
	return id
}

// rewriteInPlace writes data over path keeping its inode, again until
// the file's identity shows the write: two writes within one timestamp
// tick are indistinguishable, which is the race verifySettle covers.
func rewriteInPlace(t *testing.T, path string, data []byte, after func()) {
	t.Helper()
	before := identityOf(t, path)
	for {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(data, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if after != nil {
			after()
		}
		if identityOf(t, path) != before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func requireIdentities(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("verdicts are remembered by inode and ctime on Linux only")
	}
}

// A restart of an unchanged executable is verified without hashing it.
func TestLaunchRemembersVerdict(t *testing.T) {
	requireIdentities(t)
	path, _, sum := stubExecutable(t)
	v := agedVerifier()
	for i := range 3 {
		conn, err := launchStub(t, v, path, sum)
		if err != nil {
			t.Fatalf("launch %d: %v", i, err)
		}
		if conn.Info().Name != "stub" {
			t.Fatalf("launch %d: Info name %q", i, conn.Info().Name)
		}
		conn.Kill(0)
	}
	if got := v.Hashes(); got != 1 {
		t.Fatalf("three launches hashed the executable %d times, want 1", got)
	}
}

// A file changed within verifySettle of its hash may have changed within
// the same timestamp tick: its verdict is not remembered.
func TestVerifierRehashesRecentlyChangedFile(t *testing.T) {
	path, _, sum := stubExecutable(t)
	v := NewVerifier() // the real clock: the copy was written just now
	for range 2 {
		vf, err := v.check(path, sum)
		if err != nil {
			t.Fatal(err)
		}
		vf.f.Close()
	}
	if got := v.Hashes(); got != 2 {
		t.Fatalf("hashed %d times, want 2 (a fresh file's verdict is not remembered)", got)
	}
}

// After a verified launch, an executable changed in any way is hashed
// again and refused when it no longer matches the manifest.
func TestLaunchRefusesChangedExecutable(t *testing.T) {
	requireIdentities(t)
	tamper := func(data []byte) []byte {
		out := append([]byte(nil), data...)
		out[len(out)/2] ^= 0xff // same size, other content
		return out
	}
	cases := []struct {
		name   string
		change func(t *testing.T, path string, data []byte)
	}{
		{"rewritten in place, same size", func(t *testing.T, path string, data []byte) {
			rewriteInPlace(t, path, tamper(data), nil)
		}},
		{"rewritten in place, mtime set back", func(t *testing.T, path string, data []byte) {
			// Only the ctime tells this write apart.
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			rewriteInPlace(t, path, tamper(data), func() {
				if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
					t.Fatal(err)
				}
			})
			if got := identityOf(t, path); got.mtime != fi.ModTime().UnixNano() || got.size != fi.Size() {
				t.Fatalf("setup: mtime or size differ: %+v", got)
			}
		}},
		{"replaced by rename", func(t *testing.T, path string, data []byte) {
			tmp := path + ".new"
			if err := os.WriteFile(tmp, tamper(data), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path, data, sum := stubExecutable(t)
			v := agedVerifier()
			conn, err := launchStub(t, v, path, sum)
			if err != nil {
				t.Fatal(err)
			}
			conn.Kill(0)
			c.change(t, path, data)
			_, err = launchStub(t, v, path, sum)
			if !errors.Is(err, sdk.ErrPermission) || !strings.Contains(err.Error(), "does not match manifest sha256") {
				t.Fatalf("launch after the change: %v, want a sha256 refusal", err)
			}
			// "refused" says the class already.
			if strings.Contains(err.Error(), "permission denied") {
				t.Errorf("the refusal says its class twice: %v", err)
			}
			if got := v.Hashes(); got != 2 {
				t.Fatalf("hashed %d times, want 2 (the changed file hashed again)", got)
			}
			// The refusal stays: the verdict for the new file is remembered
			// as a mismatch, not dropped.
			if _, err := launchStub(t, v, path, sum); !errors.Is(err, sdk.ErrPermission) {
				t.Fatalf("second launch after the change: %v, want a refusal", err)
			}
		})
	}
}

// The window between the check and exec: a file changed in place there
// is caught after the start and the process killed; one renamed over the
// path never runs, since the verified file itself is executed.
func TestLaunchBetweenCheckAndExec(t *testing.T) {
	requireIdentities(t)
	t.Run("changed in place", func(t *testing.T) {
		path, _, sum := stubExecutable(t)
		v := agedVerifier()
		v.beforeExec = func() {
			// A metadata write keeps the binary runnable and changes its
			// ctime, as any write would.
			later := time.Now().Add(time.Minute)
			if err := os.Chtimes(path, later, later); err != nil {
				t.Error(err)
			}
		}
		_, err := launchStub(t, v, path, sum)
		if !errors.Is(err, sdk.ErrPermission) || !errors.Is(err, errChanged) {
			t.Fatalf("launch: %v, want the changed-while-started refusal", err)
		}
	})
	t.Run("renamed over", func(t *testing.T) {
		path, _, sum := stubExecutable(t)
		marker := filepath.Join(t.TempDir(), "ran")
		v := agedVerifier()
		v.beforeExec = func() {
			tmp := path + ".new"
			if err := os.WriteFile(tmp, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
				t.Error(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Error(err)
			}
		}
		// The verified file runs (the unlink changes its ctime, so the
		// launch is still refused, conservatively); the replacement never.
		_, err := launchStub(t, v, path, sum)
		if !errors.Is(err, errChanged) {
			t.Fatalf("launch: %v, want the changed-while-started refusal", err)
		}
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the file renamed over the verified one ran (marker: %v)", err)
		}
		v.beforeExec = nil
		if _, err := launchStub(t, v, path, sum); !errors.Is(err, sdk.ErrPermission) || !strings.Contains(err.Error(), "does not match manifest") {
			t.Fatalf("next launch: %v, want the new file refused by its digest", err)
		}
	})
}

// A launched plugin belongs to its Conn alone: go-plugin's process-wide
// CleanupClients, which another host in the same process (a test, an
// embedding program) may call, must not end it.
func TestCleanupClientsSparesLaunchedPlugin(t *testing.T) {
	path, _, sum := stubExecutable(t)
	conn, err := launchStub(t, NewVerifier(), path, sum)
	if err != nil {
		t.Fatal(err)
	}
	plugin.CleanupClients()
	if err := conn.Ping(); err != nil {
		t.Fatalf("the plugin was ended by another owner's cleanup: %v", err)
	}
	if conn.Exited() {
		t.Fatal("the plugin process exited")
	}
}
