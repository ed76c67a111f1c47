package pluginhost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }

// echoDir installs the echo test plugin with a fresh manifest.
func echoDir(t *testing.T) (dir, manifestPath string) {
	t.Helper()
	dir = t.TempDir()
	bin := testbin.Build(t, "./internal/pluginhost/testdata/echo")
	return dir, testbin.InstallPlugin(t, dir, bin)
}

func editManifest(t *testing.T, path string, edit func(m map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	data, _ = json.Marshal(m)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func discoverOne(t *testing.T, dir string) pluginhost.Entry {
	t.Helper()
	entries, refusals, err := pluginhost.Discover(dir)
	if err != nil || len(refusals) > 0 || len(entries) != 1 {
		t.Fatalf("Discover = %v, refusals %v, err %v", entries, refusals, err)
	}
	return entries[0]
}

func TestDiscoverRefusals(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir, manifest string)
		want  string
	}{
		{"unknown manifest format", func(t *testing.T, dir, manifest string) {
			editManifest(t, manifest, func(m map[string]any) { m["format"] = 3 })
		}, `format 3 is not one this memhost reads`},
		{"executable escapes by path", func(t *testing.T, dir, manifest string) {
			editManifest(t, manifest, func(m map[string]any) { m["executable"] = "../echo" })
		}, "must be a plain file name"},
		{"executable escapes by symlink", func(t *testing.T, dir, manifest string) {
			outside := filepath.Join(t.TempDir(), "evil")
			if err := os.WriteFile(outside, []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
			editManifest(t, manifest, func(m map[string]any) { m["executable"] = "link" })
		}, "outside the plugin directory"},
		{"missing executable", func(t *testing.T, dir, manifest string) {
			editManifest(t, manifest, func(m map[string]any) { m["executable"] = "nope" })
		}, "nope"},
		{"bad sha256", func(t *testing.T, dir, manifest string) {
			editManifest(t, manifest, func(m map[string]any) { m["sha256"] = "xyz" })
		}, "sha256 must be 64 hex digits"},
		{"duplicate name", func(t *testing.T, dir, manifest string) {
			data, _ := os.ReadFile(manifest)
			if err := os.WriteFile(filepath.Join(dir, "copy"+host.ManifestSuffix), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "2 manifests claim this name"},
		{"not json", func(t *testing.T, dir, manifest string) {
			os.WriteFile(manifest, []byte("name = echo"), 0o644)
		}, "manifest"},
		// Anyone who may write a plugin's files may replace what the host
		// runs, and the manifest's checksum beside it with them.
		{"manifest every user may write", func(t *testing.T, dir, manifest string) {
			if err := os.Chmod(manifest, 0o666); err != nil {
				t.Fatal(err)
			}
		}, "writable by every user"},
		{"executable every user may write", func(t *testing.T, dir, manifest string) {
			var m map[string]any
			data, _ := os.ReadFile(manifest)
			json.Unmarshal(data, &m)
			if err := os.Chmod(filepath.Join(dir, m["executable"].(string)), 0o757); err != nil {
				t.Fatal(err)
			}
		}, "writable by every user"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, manifest := echoDir(t)
			c.setup(t, dir, manifest)
			entries, refusals, err := pluginhost.Discover(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 0 || len(refusals) == 0 {
				t.Fatalf("entries %v, refusals %v: want a refusal", entries, refusals)
			}
			msg := refusals[0].Error()
			if !strings.Contains(msg, c.want) || !errors.Is(refusals[0], pluginhost.ErrRefused) || strings.Contains(msg, "\n") {
				t.Fatalf("refusal %q: want one line containing %q", msg, c.want)
			}
			if n := strings.Count(msg, "refused"); n != 1 {
				t.Fatalf("refusal %q says refused %d times, want once", msg, n)
			}
		})
	}
}

func TestDiscoverRefusesADirectoryEveryUserMayWrite(t *testing.T) {
	dir, _ := echoDir(t)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pluginhost.Discover(dir); err == nil || !strings.Contains(err.Error(), "writable by every user") {
		t.Fatalf("err = %v, want the directory refused", err)
	}
	// The sticky bit keeps others from replacing its files, not from
	// planting a manifest of their own.
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pluginhost.Discover(dir); err == nil || !strings.Contains(err.Error(), "writable by every user") {
		t.Fatalf("a sticky directory: err = %v, want it refused", err)
	}
	// A directory above it any user may write: the plugin directory could
	// be renamed away and replaced. A sticky one above it (/tmp) is fine.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	parent := filepath.Dir(dir)
	if err := os.Chmod(parent, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pluginhost.Discover(dir); err == nil || !strings.Contains(err.Error(), "which every user of the machine may write") {
		t.Fatalf("a parent every user may write: err = %v, want it refused", err)
	}
	if err := os.Chmod(parent, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if entries, _, err := pluginhost.Discover(dir); err != nil || len(entries) != 1 {
		t.Fatalf("a sticky parent: entries %v, err %v", entries, err)
	}
	os.Chmod(parent, 0o755)
	// Named through a link from a safe place: the directories above where
	// the link leads count too.
	if err := os.Chmod(parent, 0o777); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "plugins")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pluginhost.Discover(link); err == nil || !strings.Contains(err.Error(), "which every user of the machine may write") {
		t.Fatalf("a link to a directory under one every user may write: err = %v, want it refused", err)
	}
	os.Chmod(parent, 0o755)
}

func TestDiscoverMissingDirectory(t *testing.T) {
	_, _, err := pluginhost.Discover(filepath.Join(t.TempDir(), "absent"))
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("err = %v, want a clear 'does not exist'", err)
	}
}

func TestStartRefusals(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir, manifest string) pluginhost.StartOptions
		want  string
	}{
		{"tampered binary", func(t *testing.T, dir, manifest string) pluginhost.StartOptions {
			f, err := os.OpenFile(filepath.Join(dir, "echo"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte{0})
			f.Close()
			return pluginhost.StartOptions{}
		}, "does not match manifest"},
		{"version differs from Info", func(t *testing.T, dir, manifest string) pluginhost.StartOptions {
			editManifest(t, manifest, func(m map[string]any) { m["version"] = "9.9.9" })
			return pluginhost.StartOptions{}
		}, `version: manifest "9.9.9", plugin "0.1.0"`},
		{"kinds differ from Info", func(t *testing.T, dir, manifest string) pluginhost.StartOptions {
			editManifest(t, manifest, func(m map[string]any) { m["kinds"] = []string{"provider", "selector"} })
			return pluginhost.StartOptions{}
		}, `kinds: manifest ["provider" "selector"], plugin ["provider"]`},
		{"name differs from Info", func(t *testing.T, dir, manifest string) pluginhost.StartOptions {
			editManifest(t, manifest, func(m map[string]any) { m["name"] = "other" })
			return pluginhost.StartOptions{}
		}, `name: manifest "other", plugin "echo"`},
		{"stdout before handshake", func(t *testing.T, dir, manifest string) pluginhost.StartOptions {
			return pluginhost.StartOptions{Env: []string{"ECHO_STDOUT_NOISE=1"}}
		}, "start failed"},
		{"not a plugin", func(t *testing.T, dir, manifest string) pluginhost.StartOptions {
			script := []byte("#!/bin/sh\necho I am not a plugin\n")
			os.WriteFile(filepath.Join(dir, "echo"), script, 0o755)
			sum, _ := pluginhost.FileSHA256(filepath.Join(dir, "echo"))
			editManifest(t, manifest, func(m map[string]any) { m["sha256"] = sum })
			return pluginhost.StartOptions{}
		}, "start failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, manifest := echoDir(t)
			tmp := testbin.ShortTempDir(t)
			t.Setenv("TMPDIR", tmp)
			opts := c.setup(t, dir, manifest)
			opts.StartTimeout = 5 * time.Second
			e := discoverOne(t, dir)
			conn, err := pluginhost.Start(context.Background(), e, opts)
			if err == nil {
				conn.Close()
				t.Fatal("Start succeeded, want a refusal")
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) || !strings.Contains(msg, e.Manifest.Name) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line naming the plugin and containing %q", msg, c.want)
			}
			if strings.Count(msg, "refused") > 1 {
				t.Fatalf("error %q says refused more than once", msg)
			}
			// A refused launch removes the socket directory it made.
			assertNoSockets(t, tmp)
		})
	}
}

// startEcho supervises the echo plugin as provider "main" and answers its
// working directory, where echo keeps its misbehaviour switches.
func startEcho(t *testing.T, opts pluginhost.Options) (*pluginhost.Supervisor, *host.Provider) {
	t.Helper()
	sup, _ := startEchos(t, opts, pluginhost.Spec{Kind: sdk.KindProvider, Name: "main", Plugin: "echo"})
	p, err := sup.Provider("main")
	if err != nil {
		t.Fatal(err)
	}
	return sup, p
}

func startEchos(t *testing.T, opts pluginhost.Options, specs ...pluginhost.Spec) (*pluginhost.Supervisor, string) {
	t.Helper()
	dir, _ := echoDir(t)
	e := discoverOne(t, dir)
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	sup := pluginhost.New([]pluginhost.Entry{e}, opts)
	if err := sup.Start(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sup.Close)
	return sup, dir
}

// waitStatus polls the named instance's status until ok holds, within a
// generous deadline.
func waitStatus(t *testing.T, sup *pluginhost.Supervisor, instance string, what string, ok func(pluginhost.Status) bool) pluginhost.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, st := range sup.Status() {
			if st.Instance == instance && ok(st) {
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s not reached within 30s: %+v", instance, what, sup.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func pidOf(t *testing.T, sup *pluginhost.Supervisor, instance string) int {
	t.Helper()
	for _, st := range sup.Status() {
		if st.Instance == instance && st.Pid != 0 {
			return st.Pid
		}
	}
	t.Fatalf("no pid for %s: %+v", instance, sup.Status())
	return 0
}

// A restart after a crash reuses the start's verdict on the unchanged
// executable: the supervisor hands every launch its one Verifier.
func TestSupervisorRestartDoesNotRehash(t *testing.T) {
	dir, _ := echoDir(t)
	e := discoverOne(t, dir)
	// A verdict is remembered only for a file whose timestamps are 2 s old
	// (host.Verifier); wait until the fresh copy's are.
	fi, err := os.Stat(e.Executable)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	changed := time.Unix(st.Ctim.Unix())
	time.Sleep(time.Until(changed.Add(2100 * time.Millisecond)))
	v := host.NewVerifier()
	sup := pluginhost.New([]pluginhost.Entry{e}, pluginhost.Options{HealthInterval: time.Hour,
		StartOptions: pluginhost.StartOptions{Logger: hclog.NewNullLogger(), Dir: t.TempDir(), Verifier: v}})
	if err := sup.Start(context.Background(), []pluginhost.Spec{{Kind: sdk.KindProvider, Name: "main", Plugin: "echo"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sup.Close)
	if got := v.Hashes(); got != 1 {
		t.Fatalf("start hashed %d times, want 1", got)
	}
	p, err := sup.Provider("main")
	if err != nil {
		t.Fatal(err)
	}
	pid := killAndRecall(t, sup, p)
	if st := sup.Status()[0]; st.Restarts != 1 || st.Pid == pid {
		t.Fatalf("status = %+v, want one restart on a new pid", st)
	}
	if got := v.Hashes(); got != 1 {
		t.Fatalf("start and restart hashed %d times, want 1", got)
	}
}

// killAndRecall kills the plugin with SIGKILL, waits for it to be gone and
// recalls through it once (which restarts it); it answers the killed pid.
func killAndRecall(t *testing.T, sup *pluginhost.Supervisor, p *host.Provider) int {
	t.Helper()
	pid := sup.Status()[0].Pid
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExited(t, pid)
	if _, err := p.Recall(context.Background(), sdk.RecallQuery{Realm: "default", Query: "x"}); err != nil {
		t.Fatalf("recall after kill: %v", err)
	}
	return pid
}

func TestSupervisorRecoversKilledPlugin(t *testing.T) {
	sup, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour})
	ctx := context.Background()
	if _, err := writer(t, p).Remember(ctx, "default", []sdk.Record{{Scope: "realm", Kind: sdk.KindFact, Title: "x"}}); err != nil {
		t.Fatal(err)
	}
	// The read finds the process dead, the supervisor restarts it, and
	// the read is retried once.
	pid := killAndRecall(t, sup, p)
	st := sup.Status()[0]
	if st.Restarts != 1 || !st.Healthy || st.State != pluginhost.StateReady || st.Pid == pid {
		t.Fatalf("status after recovery = %+v, want 1 restart, ready, new pid", st)
	}
}

// TestKilledPluginLeavesNoSocket: the socket of a plugin killed with
// SIGKILL (which cannot remove it itself) is gone once the supervisor has
// replaced the process, as is the live one's after Close.
func TestKilledPluginLeavesNoSocket(t *testing.T) {
	tmp := testbin.ShortTempDir(t)
	t.Setenv("TMPDIR", tmp)
	sup, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour})
	sockets := func() []string {
		s, _ := filepath.Glob(filepath.Join(tmp, "mhsock-*", "plugin*"))
		return s
	}
	if s := sockets(); len(s) != 1 {
		t.Fatalf("want the running plugin's socket in a directory of its own under TMPDIR %s, got %v", tmp, s)
	}
	killAndRecall(t, sup, p)
	if s := sockets(); len(s) != 1 {
		t.Errorf("after the restart, want the new plugin's socket alone, got %v", s)
	}
	sup.Close()
	assertNoSockets(t, tmp)
}

// assertNoSockets fails when a plugin's socket or socket directory is
// left in tmp.
func assertNoSockets(t *testing.T, tmp string) {
	t.Helper()
	a, _ := filepath.Glob(filepath.Join(tmp, "mhsock-*"))
	b, _ := filepath.Glob(filepath.Join(tmp, "plugin*"))
	if left := append(a, b...); len(left) > 0 {
		t.Errorf("sockets left: %v", left)
	}
}

func TestSupervisorCrashMidCall(t *testing.T) {
	sup, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour})
	ctx := context.Background()
	// A write that kills the plugin every time is retried once, then
	// fails with a typed error...
	_, err := writer(t, p).Remember(ctx, "default", []sdk.Record{{Scope: "realm", Kind: sdk.KindFact, Title: "crash"}})
	if !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("write to a plugin that crashed mid-call: err = %v, want ErrUnavailable", err)
	}
	// The status says how the process ended (it read the refused dial of
	// the next ping).
	if st := sup.Status()[0]; !strings.Contains(st.LastError, "process exited (exit status") {
		t.Fatalf("last error after a crash mid-call: %q, want the process's exit", st.LastError)
	}
	// ...and the next call recovers on a fresh process once the backoff
	// (the second crash came soon after the first) has passed.
	if _, err := writer(t, p).Remember(ctx, "default", []sdk.Record{{Scope: "realm", Kind: sdk.KindFact, Title: "fine"}}); err != nil {
		t.Fatalf("next call after crash: %v", err)
	}
	if st := sup.Status()[0]; st.Restarts != 2 {
		t.Fatalf("restarts = %d, want 2 (one for the retry, one after the backoff)", st.Restarts)
	}
}

// A call lost with its plugin's process says how the process ended, not
// the dropped connection's words.
func TestLostCallSaysHowThePluginEnded(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(p *host.Provider) error
		want string
	}{
		{"a write, retried", func(p *host.Provider) error {
			_, err := writer(t, p).Remember(context.Background(), "default", []sdk.Record{{Scope: "realm", Kind: sdk.KindFact, Title: "crash"}})
			return err
		}, "plugin main (echo): remember: the call was lost: process exited (exit status 3)"},
		{"a recall, retried", func(p *host.Provider) error {
			_, err := p.Recall(context.Background(), sdk.RecallQuery{Realm: "default", Query: "crash"})
			return err
		}, "plugin main (echo): recall: the call was lost: process exited (exit status 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour})
			err := tc.call(p)
			if !errors.Is(err, sdk.ErrUnavailable) {
				t.Fatalf("err = %v, want ErrUnavailable", err)
			}
			if err.Error() != tc.want {
				t.Fatalf("err = %q, want %q", err, tc.want)
			}
		})
	}
}

// A write whose plugin dies under it is retried once on the restarted
// process, so the client gets an id rather than an error. The retry's log
// line carries the request id of the call's context logger.
func TestSupervisorRetriesWriteOnce(t *testing.T) {
	var logs syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true, Level: hclog.Info})
	sup, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour, StartOptions: pluginhost.StartOptions{Logger: logger}})
	pid := sup.Status()[0].Pid
	ctx := hclog.WithContext(context.Background(), logger.Named("http").With("request_id", "req-7"))
	ids, err := writer(t, p).Remember(ctx, "default", []sdk.Record{{Scope: "realm", Kind: sdk.KindFact, Title: "crash once"}})
	if err != nil || len(ids) != 1 || ids[0] == "" {
		t.Fatalf("write that crashed the plugin once = %v, %v; want its id", ids, err)
	}
	if st := sup.Status()[0]; st.Restarts != 1 || st.Pid == pid {
		t.Fatalf("status = %+v, want one restart on a new pid", st)
	}
	found := false
	for _, line := range strings.Split(logs.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || !strings.Contains(fmt.Sprint(l["@message"]), "retrying once") {
			continue
		}
		found = true
		if l["request_id"] != "req-7" {
			t.Errorf("retry line without the request id: %s", line)
		}
	}
	if !found {
		t.Fatalf("no retry line in the log:\n%s", logs.String())
	}
}

// syncBuffer is a log sink safe for the supervisor's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// slowLog is a log that takes delay to write each line.
type slowLog struct {
	syncBuffer
	delay time.Duration
}

func (l *slowLog) Write(p []byte) (int, error) {
	time.Sleep(l.delay)
	return l.syncBuffer.Write(p)
}

func TestSupervisorHungPluginDoesNotHangCaller(t *testing.T) {
	_, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour, CallTimeout: 200 * time.Millisecond})
	done := make(chan error, 1)
	go func() {
		_, err := p.Recall(context.Background(), sdk.RecallQuery{Realm: "default", Query: "hang"})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, sdk.ErrDeadline) {
			t.Fatalf("err = %v, want ErrDeadline", err)
		}
		// Said with the plugin, the call and the bound (it read gRPC's
		// bare "Deadline Exceeded").
		if msg := err.Error(); !strings.Contains(msg, "plugin main") || !strings.Contains(msg, "recall") || !strings.Contains(msg, "200ms") {
			t.Fatalf("err = %q, want it to name the plugin, the call and its bound", msg)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a hung plugin hung the caller past its deadline")
	}
}

// A call that times out says once which call it was and the bound it
// had, the caller's when sooner, never gRPC's or the context's words.
// The caller's bound is what was left of its deadline when the call
// began, so on a busy machine it reads a little less than it was set to.
// A caller whose deadline had already passed (a flush's second write,
// after its first used up their shared bound) is told that, not "no
// answer within 0s".
func TestSupervisorTimeoutSaysTheBoundOnce(t *testing.T) {
	for _, tc := range []struct {
		name        string
		callTimeout time.Duration
		caller      time.Duration // 0: no deadline of the caller's; < 0: one already passed
		want        string        // a pattern; its group, if any, is the bound in ms
		atMost      int
	}{
		{"the call timeout", 300 * time.Millisecond, 0, `^plugin main \(echo\): recall: no answer within (300)ms$`, 300},
		{"the caller's sooner deadline", time.Minute, 400 * time.Millisecond, `^plugin main \(echo\): recall: no answer within (\d+)ms$`, 400},
		{"the caller's deadline already passed", time.Minute, -time.Second, `^plugin main \(echo\): recall: its caller's deadline had passed before the call began$`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour, CallTimeout: tc.callTimeout})
			ctx := context.Background()
			if tc.caller != 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.caller)
				defer cancel()
			}
			_, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "hang"})
			if !errors.Is(err, sdk.ErrDeadline) && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want a deadline error", err)
			}
			m := regexp.MustCompile(tc.want).FindStringSubmatch(err.Error())
			if m == nil {
				t.Fatalf("err = %q, want it to match %q", err, tc.want)
			}
			if len(m) < 2 {
				return
			}
			if ms, _ := strconv.Atoi(m[1]); ms <= 0 || ms > tc.atMost {
				t.Fatalf("err = %q, want a bound in (0, %dms]", err, tc.atMost)
			}
		})
	}
}

// A call its caller gives up on (an HTTP client gone, an interrupt) says
// so: it read "no answer within 10s" a few milliseconds in, blaming the
// plugin for the client's Ctrl-C in the host's error log.
func TestSupervisorCallerCancelIsNotATimeout(t *testing.T) {
	_, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour, CallTimeout: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "hang"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the caller's cancellation", err)
	}
	if want := "plugin main (echo): recall: canceled by its caller"; err.Error() != want {
		t.Fatalf("err = %q, want %q", err, want)
	}
}

// A call fails at the call timeout even when the caller's own deadline
// (an HTTP request's) is much later.
func TestSupervisorCallTimeoutBeatsCallerDeadline(t *testing.T) {
	_, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour, CallTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := writer(t, p).Remember(ctx, "default", []sdk.Record{{Scope: "realm", Kind: sdk.KindFact, Title: "hang"}})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, sdk.ErrDeadline) {
			t.Fatalf("err = %v, want ErrDeadline", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the call waited for the caller's 10-minute deadline instead of the call timeout")
	}
}

// A stopped (SIGSTOP) plugin that holds its store's lock is killed and
// restarted by the supervisor alone, while another plugin that crashed
// meanwhile is restarted on its own goroutine.
func TestSupervisorKillsStoppedPlugin(t *testing.T) {
	// The call times out well before the health bound kills the plugin,
	// even on a loaded machine.
	opts := pluginhost.Options{HealthInterval: 50 * time.Millisecond, HealthTimeout: 3 * time.Second, KillGrace: 200 * time.Millisecond, CallTimeout: 200 * time.Millisecond}
	sup, _ := startEchos(t, opts,
		pluginhost.Spec{Kind: sdk.KindProvider, Name: "stopped", Plugin: "echo", Config: json.RawMessage(`{"lock":"stopped.lock"}`)},
		pluginhost.Spec{Kind: sdk.KindProvider, Name: "crashed", Plugin: "echo", Config: json.RawMessage(`{"lock":"crashed.lock"}`)})
	stoppedPid, crashedPid := pidOf(t, sup, "stopped"), pidOf(t, sup, "crashed")
	// Through a pidfd: a SIGCONT to the pid after the supervisor killed
	// it could continue another test's process given the same pid.
	stoppedProc, err := os.FindProcess(stoppedPid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stoppedProc.Signal(syscall.SIGCONT); _ = stoppedProc.Release() })
	stopped, _ := sup.Provider("stopped")
	if err := stoppedProc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitState(t, stoppedPid, 'T')
	// An in-flight call fails at its own deadline, before the health
	// bound has run out.
	_, err = writer(t, stopped).Remember(context.Background(), "default", []sdk.Record{{Scope: "realm", Kind: sdk.KindFact, Title: "in flight"}})
	if !errors.Is(err, sdk.ErrDeadline) {
		t.Fatalf("call to the stopped plugin: err = %v, want ErrDeadline", err)
	}
	if err := syscall.Kill(crashedPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, sup, "crashed", "restart after SIGKILL", func(st pluginhost.Status) bool {
		return st.State == pluginhost.StateReady && st.Restarts == 1 && st.Pid != crashedPid
	})
	waitStatus(t, sup, "stopped", "kill and restart after SIGSTOP", func(st pluginhost.Status) bool {
		return st.State == pluginhost.StateReady && st.Restarts == 1 && st.Pid != stoppedPid
	})
	waitExited(t, stoppedPid)
	// The new process took the store lock the stopped one held, and serves.
	ids, err := writer(t, stopped).Remember(context.Background(), "default", []sdk.Record{{Scope: "realm", Kind: sdk.KindFact, Title: "after"}})
	if err != nil || len(ids) != 1 {
		t.Fatalf("write after recovery = %v, %v", ids, err)
	}
}

// patientRecall starts a recall with a 10-minute deadline, far past any
// the test waits, and answers where its error comes.
func patientRecall(p *host.Provider) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		_, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "x"})
		done <- err
	}()
	return done
}

// breakEcho makes the echo plugin in dir fail its starts (its executable
// no longer matches the manifest) and kills the running process; it
// answers how to put an executable in place and the good one's bytes.
func breakEcho(t *testing.T, sup *pluginhost.Supervisor, dir string) (replace func([]byte), good []byte) {
	t.Helper()
	exe := filepath.Join(dir, "echo")
	good, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	replace = func(data []byte) {
		t.Helper()
		// Renamed into place: the running executable cannot be written.
		if err := os.WriteFile(exe+".new", data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(exe+".new", exe); err != nil {
			t.Fatal(err)
		}
	}
	replace(append(append([]byte{}, good...), 0))
	syscall.Kill(pidOf(t, sup, "main"), syscall.SIGKILL)
	return replace, good
}

// A plugin that cannot start again backs off exponentially (visible in
// its status) instead of retrying in a tight loop, and comes back once it
// can start.
func TestSupervisorCrashLoopBacksOff(t *testing.T) {
	const minBackoff = 40 * time.Millisecond
	sup, dir := startEchos(t, pluginhost.Options{HealthInterval: 20 * time.Millisecond, MinBackoff: minBackoff, MaxBackoff: 10 * time.Second, CallTimeout: 10 * time.Minute},
		pluginhost.Spec{Kind: sdk.KindProvider, Name: "main", Plugin: "echo"})
	p, _ := sup.Provider("main")
	replace, good := breakEcho(t, sup, dir)

	// Read in backoff: between two attempts the status is briefly
	// "restarting", which a slow poll may catch.
	st := waitStatus(t, sup, "main", "four failed starts", func(st pluginhost.Status) bool {
		return st.StartFailures >= 4 && st.State == pluginhost.StateBackoff
	})
	// Each failure doubles the wait: a busy loop would show the minimum.
	want := minBackoff << (st.StartFailures - 1)
	if st.State != pluginhost.StateBackoff || st.Healthy || st.NextAttempt == nil || st.BackoffMillis != want.Milliseconds() || !strings.Contains(st.LastError, "sha256") {
		t.Fatalf("status in a crash loop = %+v, want backoff of %v, a next attempt and the sha256 refusal", st, want)
	}
	if sup.Ready() {
		t.Fatal("Ready() with a plugin in a crash loop")
	}
	// A call whose deadline falls before the next attempt fails fast.
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "x"}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("call during backoff: err = %v, want ErrUnavailable", err)
	}
	// Even a patient caller is not held by a plugin that fails to start:
	// it gets the typed error instead of waiting out the crash loop.
	done := patientRecall(p)
	select {
	case err := <-done:
		if !errors.Is(err, sdk.ErrUnavailable) {
			t.Fatalf("patient call during the crash loop: err = %v, want ErrUnavailable", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a call waited through the crash loop instead of one attempt")
	}
	replace(good)
	waitStatus(t, sup, "main", "recovery once the executable is good", func(st pluginhost.Status) bool {
		return st.State == pluginhost.StateReady && st.Restarts == 1 && st.StartFailures == 0
	})
	if !sup.Ready() {
		t.Fatal("not Ready() after recovery")
	}
}

// A restart never runs on the caller's context: a caller waits only as
// long as its own deadline, and Close does not wait for the restart's
// start and configure timeouts.
func TestSupervisorRestartDoesNotBlockCallerOrClose(t *testing.T) {
	work := t.TempDir()
	sup, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour, ConfigureTimeout: 10 * time.Minute, StartOptions: pluginhost.StartOptions{Dir: work}})
	pid := sup.Status()[0].Pid
	// The next start's Configure never returns.
	if err := os.WriteFile(filepath.Join(work, "hang-configure"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	waitExited(t, pid)
	within := func(what string, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s blocked on a restart that cannot finish", what)
		}
	}
	within("a call with a 300ms deadline", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if _, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "x"}); !errors.Is(err, sdk.ErrUnavailable) {
			t.Errorf("call during a hung restart: err = %v, want ErrUnavailable", err)
		}
	})
	if st := sup.Status()[0]; st.State != pluginhost.StateRestarting {
		t.Fatalf("state = %s, want restarting", st.State)
	}
	within("Close", sup.Close)
	if st := sup.Status()[0]; st.State != pluginhost.StateStopped {
		t.Fatalf("state after Close = %s", st.State)
	}
}

// TestSupervisorWarnsOfChangedCapabilities: the manifest pins no
// capabilities, so a restarted plugin whose Info is not constant comes
// back declaring others; the host serves what it declares now, and says
// so in a warning.
func TestSupervisorWarnsOfChangedCapabilities(t *testing.T) {
	work := t.TempDir()
	// A slow log stands for a busy machine: the warning must be written
	// before the instance reads ready, not raced with it.
	logs := slowLog{delay: 50 * time.Millisecond}
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true, Level: hclog.Info})
	sup, p := startEcho(t, pluginhost.Options{HealthInterval: 20 * time.Millisecond, StartOptions: pluginhost.StartOptions{Dir: work, Logger: logger}})
	if !p.Capabilities().Has(sdk.CapReindex) {
		t.Fatal("echo declares reindex")
	}
	if err := os.WriteFile(filepath.Join(work, "fewer-capabilities"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	pid := sup.Status()[0].Pid
	syscall.Kill(pid, syscall.SIGKILL)
	waitStatus(t, sup, "main", "the restart", func(st pluginhost.Status) bool {
		return st.State == pluginhost.StateReady && st.Restarts == 1
	})
	if p.Capabilities().Has(sdk.CapReindex) {
		t.Fatal("the restarted plugin no longer declares reindex, and the host still serves it")
	}
	if !strings.Contains(logs.String(), "declaring other capabilities") || !strings.Contains(logs.String(), "reindex") {
		t.Fatalf("no warning of the changed capabilities:\n%s", logs.String())
	}
	// /v1/plugins shows the host's warnings about the instance, this one
	// too (only the start's lines reached it).
	if st := sup.Status()[0]; !slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.Contains(w, "declaring other capabilities") }) {
		t.Fatalf("status warnings %q lack the changed capabilities", st.Warnings)
	}
}

// TestSupervisorFirstStartAfterFailuresChangesNoCapabilities: a plugin
// whose first starts failed (its store's lock still held, as by a killed
// host's plugin still closing) and which then starts had declared nothing
// before: no warning of changed capabilities, in the log or the status.
func TestSupervisorFirstStartAfterFailuresChangesNoCapabilities(t *testing.T) {
	work := t.TempDir()
	held, err := os.OpenFile(filepath.Join(work, "store.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true, Level: hclog.Info})
	sup, _ := startEchos(t, pluginhost.Options{HealthInterval: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, StartOptions: pluginhost.StartOptions{Dir: work, Logger: logger}},
		pluginhost.Spec{Kind: sdk.KindProvider, Name: "main", Plugin: "echo", Config: json.RawMessage(`{"lock":"store.lock"}`)})
	waitStatus(t, sup, "main", "a failed start", func(st pluginhost.Status) bool { return st.StartFailures > 0 })
	held.Close()
	waitStatus(t, sup, "main", "the start once the lock is free", func(st pluginhost.Status) bool { return st.State == pluginhost.StateReady })
	if strings.Contains(logs.String(), "other capabilities") {
		t.Errorf("a first start after failed ones was logged as changing capabilities:\n%s", logs.String())
	}
	if st := sup.Status()[0]; slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.Contains(w, "other capabilities") }) {
		t.Errorf("status warnings %q report changed capabilities of a plugin that had declared none", st.Warnings)
	}
}

// TestSupervisorCloseRetriesNothing: a call whose plugin the host's own
// stop ends is not retried (there is no restart to run it on), and the
// log does not say it is.
func TestSupervisorCloseRetriesNothing(t *testing.T) {
	work := t.TempDir()
	var logs syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true, Level: hclog.Info})
	sup, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour, CallTimeout: 10 * time.Minute, KillGrace: 10 * time.Millisecond,
		StartOptions: pluginhost.StartOptions{Dir: work, Logger: logger}})
	done := make(chan error, 1)
	go func() {
		_, err := p.Recall(context.Background(), sdk.RecallQuery{Realm: "default", Query: "hang"})
		done <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(work, "hanging")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never reached the plugin")
		}
	}
	sup.Close()
	if err := <-done; !errors.Is(err, sdk.ErrUnavailable) || !strings.Contains(err.Error(), "shut down") {
		t.Errorf("call ended by the host's stop = %v, want unavailable, the plugin shut down", err)
	}
	if strings.Contains(logs.String(), "retrying") {
		t.Errorf("the host's stop was logged as a retry on a restarted process:\n%s", logs.String())
	}
}

func TestSupervisorUndeclaredCapability(t *testing.T) {
	_, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour})
	if p.Capabilities().Has(sdk.CapFetch) {
		t.Fatal("echo does not declare fetch")
	}
	if _, ok := p.Getter(); ok {
		t.Fatal("Getter answers true, but echo does not declare fetch")
	}
	if _, ok := p.Writer(); !ok {
		t.Fatal("Writer answers false, but echo declares write")
	}
}

// writer answers p's RecordWriter, failing the test when it has none.
func writer(t testing.TB, p *host.Provider) sdk.RecordWriter {
	t.Helper()
	w, ok := p.Writer()
	if !ok {
		t.Fatal("Writer answers false, but the plugin declares write")
	}
	return w
}

func TestSupervisorStartErrors(t *testing.T) {
	dir, _ := echoDir(t)
	e := discoverOne(t, dir)
	cases := []struct {
		spec pluginhost.Spec
		want string
	}{
		{pluginhost.Spec{Kind: sdk.KindProvider, Name: "main", Plugin: "nosuch"}, `no plugin named "nosuch"`},
		{pluginhost.Spec{Kind: sdk.KindSelector, Name: "sel", Plugin: "echo"}, "does not serve kind selector"},
		{pluginhost.Spec{Kind: sdk.KindProvider, Name: "main", Plugin: "echo", Config: json.RawMessage(`{"bogus":1}`)}, `unknown field "bogus"`},
	}
	for _, c := range cases {
		// A plugin that fails to configure fails Start only under
		// RequireAll; a spec naming no usable plugin fails it always.
		sup := pluginhost.New([]pluginhost.Entry{e}, pluginhost.Options{StartOptions: pluginhost.StartOptions{Logger: hclog.NewNullLogger()}, RequireAll: true})
		err := sup.Start(context.Background(), []pluginhost.Spec{c.spec})
		sup.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("pluginhost.Start(%+v) = %v, want error containing %q", c.spec, err, c.want)
		}
		// The instance named once ("provider "main": plugin main: ...").
		if err != nil && strings.Contains(err.Error(), ": plugin "+c.spec.Name+": ") {
			t.Errorf("pluginhost.Start(%+v) = %v names the instance twice", c.spec, err)
		}
	}
}

// A Configure that outlives its bound says so, with the bound, and the
// host's log names the plugin it waits for while it runs.
func TestSupervisorConfigureTimeoutSaysSo(t *testing.T) {
	dir, _ := echoDir(t)
	e := discoverOne(t, dir)
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "hang-configure"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true, Level: hclog.Info})
	sup := pluginhost.New([]pluginhost.Entry{e}, pluginhost.Options{ConfigureTimeout: 6 * time.Second, RequireAll: true,
		StartOptions: pluginhost.StartOptions{Dir: work, Logger: logger}})
	err := sup.Start(context.Background(), []pluginhost.Spec{{Kind: sdk.KindProvider, Name: "slow", Plugin: "echo"}})
	sup.Close()
	if err == nil || !strings.Contains(err.Error(), "did not finish configuring") || !strings.Contains(err.Error(), "6s") ||
		!strings.Contains(err.Error(), "supervisor.configure_timeout_ms") {
		t.Fatalf("Start = %v, want it to say Configure did not finish within 6s, naming the setting", err)
	}
	if !strings.Contains(logs.String(), "waiting for the plugin to configure") || !strings.Contains(logs.String(), `"instance":"slow"`) {
		t.Fatalf("no log line naming the plugin the start waited for:\n%s", logs.String())
	}
}

// Without RequireAll an instance that cannot start leaves Start to the
// others: it backs off with the reason, its calls are refused as
// provider_unavailable (not as an undeclared capability), and the healthy
// instance serves.
func TestSupervisorStartFailureStaysLocal(t *testing.T) {
	dir, _ := echoDir(t)
	e := discoverOne(t, dir)
	sup := pluginhost.New([]pluginhost.Entry{e}, pluginhost.Options{StartOptions: pluginhost.StartOptions{Logger: hclog.NewNullLogger()}, MinBackoff: time.Hour, MaxBackoff: time.Hour})
	t.Cleanup(sup.Close)
	err := sup.Start(context.Background(), []pluginhost.Spec{
		{Kind: sdk.KindProvider, Name: "good", Plugin: "echo"},
		{Kind: sdk.KindProvider, Name: "bad", Plugin: "echo", Config: json.RawMessage(`{"bogus":1}`)},
	})
	if err != nil {
		t.Fatalf("Start = %v, want the healthy instance started", err)
	}
	if sup.Ready() {
		t.Error("Ready with an instance that failed to start")
	}
	st := sup.Status()
	if st[0].State != pluginhost.StateReady || st[1].State != pluginhost.StateBackoff || !strings.Contains(st[1].LastError, `unknown field "bogus"`) || st[1].NextAttempt == nil {
		t.Fatalf("status = %+v, want good ready and bad backing off with its reason", st)
	}
	// The good instance serves once up, the slow one never holding it.
	waitStatus(t, sup, "good", "the good instance's start", func(st pluginhost.Status) bool { return st.State == pluginhost.StateReady })
	good, _ := sup.Provider("good")
	if _, err := good.Recall(context.Background(), sdk.RecallQuery{Realm: "default", Query: "x"}); err != nil {
		t.Errorf("healthy instance: %v", err)
	}
	bad, _ := sup.Provider("bad")
	if _, ok := bad.Writer(); !ok {
		t.Error("a provider that never started answers no Writer: its writes would be 501, not 503")
	}
	_, err = writer(t, bad).Remember(context.Background(), "default", []sdk.Record{{Scope: "realm", Kind: sdk.KindFact, Title: "x"}})
	if !errors.Is(err, pluginhost.ErrProviderUnavailable) || !errors.Is(err, sdk.ErrUnavailable) || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("write to the failed instance: err = %v, want provider unavailable with the reason", err)
	}
}

// An instance whose first start failed is retried when its backoff says,
// as its log line announces (retry_in_ms), not a health interval later:
// a store still locked by a killed host's plugin, which frees it within a
// moment, kept the realm answering 503 for the whole health interval.
func TestFailedFirstStartRetriesAtItsBackoff(t *testing.T) {
	for _, c := range []struct {
		name     string
		bootWait time.Duration // 0: Start waits for the start
	}{
		{"failed while Start waited", 0},
		{"failed after Start returned", time.Nanosecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := echoDir(t)
			e := discoverOne(t, dir)
			lock := filepath.Join(t.TempDir(), "store.lock")
			held, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				t.Fatal(err)
			}
			// Health checks far off: only the backoff can bring the retry.
			sup := pluginhost.New([]pluginhost.Entry{e}, pluginhost.Options{StartOptions: pluginhost.StartOptions{Logger: hclog.NewNullLogger()},
				HealthInterval: time.Hour, BootWait: c.bootWait, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
			t.Cleanup(sup.Close)
			if err := sup.Start(context.Background(), []pluginhost.Spec{{Kind: sdk.KindProvider, Name: "main", Plugin: "echo", Config: json.RawMessage(fmt.Sprintf(`{"lock":%q}`, lock))}}); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, sup, "main", "the first start refused by the held lock", func(st pluginhost.Status) bool { return st.StartFailures > 0 })
			// The holder lets go, as the plugin of a killed host does.
			held.Close()
			waitStatus(t, sup, "main", "a retry once the lock is free", func(st pluginhost.Status) bool { return st.State == pluginhost.StateReady })
		})
	}
}

// waitState waits until the process shows state (as in /proc/pid/stat):
// a signal takes effect asynchronously.
func waitState(t *testing.T, pid int, state byte) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if i := strings.LastIndexByte(string(data), ')'); err == nil && i >= 0 && i+2 < len(data) && data[i+2] == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never reached state %c", pid, state)
		}
		time.Sleep(time.Millisecond)
	}
}

func waitExited(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		// A killed child stays a zombie until go-plugin reaps it.
		if data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err == nil && strings.Contains(string(data), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still alive", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Reindex runs under the reindex timeout, not the call timeout: a rebuild
// that outlasts every ordinary call succeeds, and one that never ends
// fails at the reindex timeout, whatever the caller's own deadline.
func TestSupervisorReindexHasItsOwnDeadline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		realm   string
		timeout time.Duration
		err     error
	}{
		{name: "outlasts the call timeout", realm: "slow", timeout: time.Minute},
		{name: "bounded by the reindex timeout", realm: "hang", timeout: 300 * time.Millisecond, err: sdk.ErrDeadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour, CallTimeout: 100 * time.Millisecond, ReindexTimeout: tc.timeout})
			rx, ok := p.Reindexer()
			if !ok {
				t.Fatal("Reindexer answers false, but the plugin declares reindex")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			var last [2]int
			_, err := rx.Reindex(ctx, tc.realm, func(done, total int) { last = [2]int{done, total} })
			if tc.err == nil && (err != nil || last != [2]int{0, 0}) {
				t.Fatalf("Reindex(%s) = %v, last progress %v; want success", tc.realm, err, last)
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("Reindex(%s) = %v, want an error wrapping %v", tc.realm, err, tc.err)
			}
		})
	}
}

// TestSupervisorObservesEveryProviderCall: the call observer sees each
// provider call by method with its outcome, a refused undeclared one too,
// through the one path every kind takes.
func TestSupervisorObservesEveryProviderCall(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
	)
	obs := func(instance, method string, _ time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s %s %s", instance, method, sdk.CodeOf(err)))
	}
	sup, _ := startEchos(t, pluginhost.Options{HealthInterval: time.Hour, ObserveCall: obs}, pluginhost.Spec{Kind: sdk.KindProvider, Name: "main", Plugin: "echo"})
	hp, err := sup.Provider("main")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := hp.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := writer(t, hp).Remember(ctx, "default", []sdk.Record{{Scope: "realm", Kind: sdk.KindFact, Title: "x"}}); err != nil {
		t.Fatal(err)
	}
	// Get reached through the writer's value: the plugin did not declare
	// fetch, so the supervised provider refuses it, and says so.
	if g, ok := any(writer(t, hp)).(sdk.RecordGetter); ok {
		if _, err := g.Get(ctx, "default", []string{"x"}); !errors.Is(err, sdk.ErrUnsupported) {
			t.Fatalf("undeclared Get = %v, want sdk.ErrUnsupported", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"main recall ok", "main remember ok", "main get unsupported"}
	if !slices.Equal(seen, want) {
		t.Fatalf("observed %q, want %q", seen, want)
	}
}

// TestLexicalOnlySkipsQueryEmbedding: a recall to a provider that stores
// vectors (the sqlite plugin) is prepared by the vector hooks, unless its
// context asks for lexical recall only.
func TestLexicalOnlySkipsQueryEmbedding(t *testing.T) {
	entries, _, err := pluginhost.Discover(testbin.PluginDir(t, "sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	sup := pluginhost.New(entries, pluginhost.Options{HealthInterval: time.Hour, StartOptions: pluginhost.StartOptions{Logger: hclog.NewNullLogger(), Dir: t.TempDir()}})
	spec := pluginhost.Spec{Kind: sdk.KindProvider, Name: "main", Plugin: "sqlite", Config: json.RawMessage(`{"path":"memory.db"}`)}
	if err := sup.Start(context.Background(), []pluginhost.Spec{spec}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sup.Close)
	var prepared atomic.Int32
	sup.SetVectorHooks(pluginhost.VectorHooks{PrepareRecall: func(context.Context, *sdk.RecallQuery) string {
		prepared.Add(1)
		return ""
	}})
	hp, err := sup.Provider("main")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want int32
	}{
		{"plain", context.Background(), 1},
		{"lexical only", pluginhost.LexicalOnly(context.Background()), 1},
		{"plain again", context.Background(), 2},
	} {
		if _, err := hp.Recall(tc.ctx, sdk.RecallQuery{Realm: "default", Query: "x"}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := prepared.Load(); got != tc.want {
			t.Errorf("%s: prepared %d recalls, want %d", tc.name, got, tc.want)
		}
	}
}

// A remote plugin out of reach at start is an instance like any other
// that cannot start: backing off with the reason and its address, its
// calls refused as provider_unavailable, the supervisor not ready.
func TestSupervisorRemoteOutOfReach(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	sup := pluginhost.New(nil, pluginhost.Options{StartOptions: pluginhost.StartOptions{Logger: hclog.NewNullLogger()}, MinBackoff: time.Hour, MaxBackoff: time.Hour})
	t.Cleanup(sup.Close)
	if err := sup.Start(context.Background(), []pluginhost.Spec{{Kind: sdk.KindProvider, Name: "far", Remote: &host.Remote{Address: addr}}}); err != nil {
		t.Fatalf("Start = %v, want the unreachable remote left backing off", err)
	}
	st := sup.Status()[0]
	if st.State != pluginhost.StateBackoff || st.Address != addr || st.Healthy || !strings.Contains(st.LastError, "connection refused") {
		t.Fatalf("status = %+v, want backoff at %s with the reason", st, addr)
	}
	if sup.Ready() {
		t.Error("Ready with the remote out of reach")
	}
	p, _ := sup.Provider("far")
	_, err = p.Recall(context.Background(), sdk.RecallQuery{Realm: "default", Query: "x"})
	if !errors.Is(err, pluginhost.ErrProviderUnavailable) {
		t.Errorf("recall = %v, want provider unavailable", err)
	}
	// Said once, in plain words: not gRPC's ("connection error: desc =
	// "transport: Error while dialing: …"), nor the plugin named again.
	if want := "plugin far (remote " + addr + ") is down: Info call failed: cannot connect to the plugin: connection refused; next start attempt at "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("recall = %q, want it to start %q", err, want)
	}
	sup2 := pluginhost.New(nil, pluginhost.Options{StartOptions: pluginhost.StartOptions{Logger: hclog.NewNullLogger()}, RequireAll: true})
	defer sup2.Close()
	if err := sup2.Start(context.Background(), []pluginhost.Spec{{Kind: sdk.KindProvider, Name: "far", Remote: &host.Remote{Address: addr}}}); err == nil || !strings.Contains(err.Error(), `provider "far"`) {
		t.Errorf("Start under RequireAll = %v, want the refusal naming the instance", err)
	}
}

// A plugin answering another tenant's record: every call is refused as a
// broken answer naming the instance, never passed on, and the host logs
// it once per process rather than once per call; /v1/plugins shows it.
func TestSupervisorRefusesBrokenAnswersLoggingOnce(t *testing.T) {
	var logs syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true, Level: hclog.Info})
	sup, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour, StartOptions: pluginhost.StartOptions{Logger: logger}})
	for range 3 {
		hits, err := p.Recall(context.Background(), sdk.RecallQuery{Realm: "default", Query: "another realm"})
		if !errors.Is(err, host.ErrBadAnswer) || hits != nil || !strings.Contains(err.Error(), "plugin main (echo)") {
			t.Fatalf("recall answered with another realm's record = %v, %v; want it refused, naming the instance", hits, err)
		}
		if strings.Contains(err.Error(), "tenant-b") {
			t.Fatalf("the error names the other tenant: %v", err)
		}
	}
	if n := strings.Count(logs.String(), "plugin answered against the protocol"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
	if w := sup.Status()[0].Warnings; len(w) != 1 || !strings.Contains(w[0], "another realm") {
		t.Errorf("warnings = %q, want the broken answer", w)
	}
	// The plugin's own warning lines, however many and however worded,
	// neither push the host's finding out nor pass for the host's words.
	if _, err := p.Recall(context.Background(), sdk.RecallQuery{Realm: "default", Query: "forge warnings"}); err != nil {
		t.Fatal(err)
	}
	var w []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if w = sup.Status()[0].Warnings; slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, "other capabilities") }) {
			break
		}
	}
	if len(w) != 6 || !strings.Contains(w[0], "another realm") || strings.HasPrefix(w[0], "plugin said: ") {
		t.Fatalf("warnings = %q, want the host's finding first, then the plugin's five latest lines", w)
	}
	for _, line := range w[1:] {
		if !strings.HasPrefix(line, "plugin said: ") {
			t.Errorf("the plugin's line %q is not marked as the plugin's", line)
		}
	}
	if st := sup.Status()[0]; st.Restarts != 0 || st.State != pluginhost.StateReady {
		t.Errorf("status = %+v: a broken answer is no crash", st)
	}
}

// Two instances configured onto one store: the one that cannot take it
// names the process of this host that holds it, not only "another
// process", which sends an operator looking for a second host.
func TestStoreHeldByAnotherInstanceIsNamed(t *testing.T) {
	opts := pluginhost.Options{HealthInterval: time.Hour, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	sup, _ := startEchos(t, opts,
		pluginhost.Spec{Kind: sdk.KindProvider, Name: "a", Plugin: "echo", Config: json.RawMessage(`{"lock":"one.lock"}`)},
		pluginhost.Spec{Kind: sdk.KindProvider, Name: "b", Plugin: "echo", Config: json.RawMessage(`{"lock":"one.lock"}`)})
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ready, refused *pluginhost.Status
		for _, st := range sup.Status() {
			switch {
			case st.State == pluginhost.StateReady:
				ready = &st
			case st.LastError != "":
				refused = &st
			}
		}
		if ready != nil && refused != nil {
			want := fmt.Sprintf("this host's other plugin processes: provider %q pid %d", ready.Instance, ready.Pid)
			if strings.Contains(refused.LastError, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's error does not name %s's process (%s): %s", refused.Instance, ready.Instance, want, refused.LastError)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("not one ready and one refused: %+v", sup.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A plugin starting again after a failed start fails a call fast, as its
// backoff does: a patient caller waited out its whole deadline on each
// attempt of a plugin that kept failing (here one whose Configure hangs
// after a start refused for its sha256).
func TestSupervisorCallDuringARetriedStartFailsFast(t *testing.T) {
	work := t.TempDir()
	sup, dir := startEchos(t, pluginhost.Options{HealthInterval: 20 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
		ConfigureTimeout: 10 * time.Minute, CallTimeout: 10 * time.Minute, StartOptions: pluginhost.StartOptions{Dir: work}},
		pluginhost.Spec{Kind: sdk.KindProvider, Name: "main", Plugin: "echo"})
	p, _ := sup.Provider("main")
	replace, good := breakEcho(t, sup, dir)
	waitStatus(t, sup, "main", "a failed start", func(st pluginhost.Status) bool { return st.StartFailures >= 1 })
	if err := os.WriteFile(filepath.Join(work, "hang-configure"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	replace(good)
	waitStatus(t, sup, "main", "an attempt hung in Configure", func(st pluginhost.Status) bool {
		return st.State == pluginhost.StateRestarting && st.StartFailures >= 1
	})
	time.Sleep(500 * time.Millisecond) // past any backoff: the good start is the one hung
	if st := sup.Status()[0]; st.State != pluginhost.StateRestarting {
		t.Fatalf("state %s, want the hung start's restarting", st.State)
	}
	done := patientRecall(p)
	select {
	case err := <-done:
		if !errors.Is(err, sdk.ErrUnavailable) || !strings.Contains(err.Error(), "failed start") {
			t.Fatalf("call during a retried start: err = %v, want ErrUnavailable naming the failed starts", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a call waited on a start attempt after a failed one")
	}
}

// One instance whose store takes long to open does not hold the others at
// boot: Start waits for it only BootWait, the others serve, its calls fail
// fast as still starting, and Close does not wait for it (it held every
// realm until its configure timeout, two minutes by default).
func TestSupervisorSlowStartDoesNotHoldTheOthers(t *testing.T) {
	dir, _ := echoDir(t)
	e := discoverOne(t, dir)
	sup := pluginhost.New([]pluginhost.Entry{e}, pluginhost.Options{BootWait: time.Second, ConfigureTimeout: 10 * time.Minute, HealthInterval: time.Hour,
		StartOptions: pluginhost.StartOptions{Dir: t.TempDir(), Logger: hclog.NewNullLogger()}})
	began := time.Now()
	err := sup.Start(context.Background(), []pluginhost.Spec{
		// Past the boot wait, as any plugin may be on a busy machine, but up.
		{Kind: sdk.KindProvider, Name: "good", Plugin: "echo", Config: json.RawMessage(`{"slow_ms":1500}`)},
		{Kind: sdk.KindProvider, Name: "slow", Plugin: "echo", Config: json.RawMessage(`{"hang":true}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > time.Minute {
		t.Fatalf("Start took %v, held by the slow instance", took)
	}
	// The good instance serves once up, the slow one never holding it.
	waitStatus(t, sup, "good", "the good instance's start", func(st pluginhost.Status) bool { return st.State == pluginhost.StateReady })
	good, _ := sup.Provider("good")
	if _, err := good.Recall(context.Background(), sdk.RecallQuery{Realm: "default", Query: "x"}); err != nil {
		t.Fatalf("the good instance: %v", err)
	}
	slow, _ := sup.Provider("slow")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	called := time.Now()
	if _, err := slow.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "x"}); !errors.Is(err, sdk.ErrUnavailable) || !strings.Contains(err.Error(), "still starting") {
		t.Fatalf("a call to the slow instance: %v, want unavailable as still starting", err)
	}
	if took := time.Since(called); took > 30*time.Second {
		t.Fatalf("the call to the slow instance took %v", took)
	}
	var st pluginhost.Status
	for _, s := range sup.Status() {
		if s.Instance == "slow" {
			st = s
		}
	}
	if st.State != pluginhost.StateStarting || !slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.Contains(w, "still starting") }) {
		t.Fatalf("slow instance status %+v, want starting with the host's warning", st)
	}
	closed := make(chan struct{})
	go func() { sup.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close waited for the slow instance's start")
	}
}

// TestCrashUnderLoadKeepsEarlierWarnings: every call in flight on a
// process that dies is retried, and says so in the log; only the first of
// them is kept among the instance's warnings, so a crash under load does
// not push out what the host found before (here, a restart declaring
// other capabilities).
func TestCrashUnderLoadKeepsEarlierWarnings(t *testing.T) {
	work := t.TempDir()
	sup, p := startEcho(t, pluginhost.Options{HealthInterval: 20 * time.Millisecond, CallTimeout: 2 * time.Second, StartOptions: pluginhost.StartOptions{Dir: work}})
	if err := os.WriteFile(filepath.Join(work, "fewer-capabilities"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(sup.Status()[0].Pid, syscall.SIGKILL)
	waitStatus(t, sup, "main", "the restart", func(st pluginhost.Status) bool {
		return st.State == pluginhost.StateReady && st.Restarts == 1
	})
	changed := func(w string) bool { return strings.Contains(w, "declaring other capabilities") }
	if !slices.ContainsFunc(sup.Status()[0].Warnings, changed) {
		t.Fatalf("status warnings %q lack the changed capabilities", sup.Status()[0].Warnings)
	}
	w, ok := p.Writer()
	if !ok {
		t.Fatal("echo declares write")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Remember(context.Background(), "default", []sdk.Record{{Scope: "realm", Kind: "fact", Title: "hang", Body: "b"}})
		}()
	}
	time.Sleep(300 * time.Millisecond) // the calls reach the process
	syscall.Kill(sup.Status()[0].Pid, syscall.SIGKILL)
	wg.Wait()
	st := sup.Status()[0]
	retried := 0
	for _, w := range st.Warnings {
		if strings.Contains(w, "died under a call") {
			retried++
		}
	}
	if retried != 1 || !slices.ContainsFunc(st.Warnings, changed) {
		t.Fatalf("after a crash under 8 calls the warnings are %q, want one retry line and the changed capabilities still there", st.Warnings)
	}
}

// TestDeathInConfigureSaysHow: a plugin that dies while configuring is
// reported by how its process ended, not by the dropped connection's
// transport wording.
func TestDeathInConfigureSaysHow(t *testing.T) {
	dir, _ := echoDir(t)
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "crash-configure"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sup := pluginhost.New([]pluginhost.Entry{discoverOne(t, dir)}, pluginhost.Options{RequireAll: true, StartOptions: pluginhost.StartOptions{Dir: work}})
	t.Cleanup(sup.Close)
	err := sup.Start(context.Background(), []pluginhost.Spec{{Kind: sdk.KindProvider, Name: "main", Plugin: "echo"}})
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || strings.Contains(err.Error(), "reading from server") {
		t.Fatalf("Start of a plugin that dies configuring = %v, want how it exited (exit status 3)", err)
	}
}

// TestDownErrorQuotesNoPluginOutput: a plugin that fails to start again
// leaves its last output in the operator's status and log, not in the
// error every caller of any realm it serves is answered, since that output
// may name another realm's data.
func TestDownErrorQuotesNoPluginOutput(t *testing.T) {
	for _, tc := range []struct{ name, switchFile, reason string }{
		{"its last output", "die-at-start", "exit status 1"},
		// go-plugin's refusal of a line that is not the handshake
		// quotes the line.
		{"a line on stdout", "stdout-at-start", "instead of the handshake"},
	} {
		t.Run(tc.name, func(t *testing.T) { downErrorQuotesNoPluginOutput(t, tc.switchFile, tc.reason) })
	}
}

func downErrorQuotesNoPluginOutput(t *testing.T, switchFile, reason string) {
	work := t.TempDir()
	sup, p := startEcho(t, pluginhost.Options{HealthInterval: 20 * time.Millisecond, StartOptions: pluginhost.StartOptions{Dir: work, Logger: hclog.NewNullLogger()}})
	if err := os.WriteFile(filepath.Join(work, switchFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(sup.Status()[0].Pid, syscall.SIGKILL)
	waitStatus(t, sup, "main", "a failed restart", func(st pluginhost.Status) bool {
		return st.State == pluginhost.StateBackoff && strings.Contains(st.LastError, "salary")
	})
	_, err := p.Recall(context.Background(), sdk.RecallQuery{Realm: "default", Query: "coffee"})
	if !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("recall of a plugin that cannot start = %v, want unavailable", err)
	}
	if strings.Contains(err.Error(), "salary") || strings.Contains(err.Error(), "tenant-b") {
		t.Fatalf("the caller's error quotes the plugin's output: %v", err)
	}
	if !strings.Contains(err.Error(), reason) {
		t.Fatalf("the caller's error lost the reason (%s): %v", reason, err)
	}
}

// A call refused while its plugin cannot start says the plugin and why
// once: not again under the labels its start wrapped the reason in (kind
// and name, the executable's and manifest's paths), nor its class.
func TestDownErrorSaysTheCauseOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(t *testing.T, sup *pluginhost.Supervisor, dir, work string)
		cause   string
	}{
		{"dies at start", func(t *testing.T, sup *pluginhost.Supervisor, dir, work string) {
			if err := os.WriteFile(filepath.Join(work, "die-at-start"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			syscall.Kill(sup.Status()[0].Pid, syscall.SIGKILL)
		}, "start failed: "},
		{"executable changed", func(t *testing.T, sup *pluginhost.Supervisor, dir, work string) {
			breakEcho(t, sup, dir)
		}, "sha256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := t.TempDir()
			sup, dir := startEchos(t, pluginhost.Options{HealthInterval: 20 * time.Millisecond, MaxBackoff: time.Minute, StartOptions: pluginhost.StartOptions{Dir: work, Logger: hclog.NewNullLogger()}},
				pluginhost.Spec{Kind: sdk.KindProvider, Name: "main", Plugin: "echo"})
			p, _ := sup.Provider("main")
			tc.breakIt(t, sup, dir, work)
			waitStatus(t, sup, "main", "a failed restart", func(st pluginhost.Status) bool {
				return st.State == pluginhost.StateBackoff && st.StartFailures > 0
			})
			_, err := p.Recall(context.Background(), sdk.RecallQuery{Realm: "default", Query: "x"})
			if !errors.Is(err, sdk.ErrUnavailable) || !errors.Is(err, pluginhost.ErrProviderUnavailable) {
				t.Fatalf("recall of a plugin that cannot start = %v, want unavailable", err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "plugin main (echo) is down: ") || !strings.Contains(msg, tc.cause) {
				t.Fatalf("err = %q, want the plugin named and then %q", msg, tc.cause)
			}
			for _, again := range []string{`provider "main"`, "plugin main (/", "(manifest ", sdk.ErrUnavailable.Error(), sdk.ErrPermission.Error(), "waiting to restart"} {
				if strings.Contains(msg, again) {
					t.Errorf("err = %q, says %q again", msg, again)
				}
			}
		})
	}
}

// What a Go plugin prints to stdout while it serves reaches the host's
// log under the instance, as a Python or TypeScript plugin's print does:
// go-plugin forwards it, and dropped it unless the host reads it.
func TestPluginStdoutWhileServingIsLogged(t *testing.T) {
	var logs syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	_, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour, StartOptions: pluginhost.StartOptions{Logger: logger}})
	if _, err := p.Recall(context.Background(), sdk.RecallQuery{Realm: "default", Query: "print"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "main: printed to stdout while serving"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the plugin's printed line is not in the host's log:\n%s", logs.String())
		}
	}
}

// A Go plugin's raw writes to descriptor 1 (a C library's printf) reach
// the host's log whatever their length, and never block the plugin: the
// host reads the plugin's stdout for the handshake with a line scanner
// that gives up at a line over 64 KiB, after which writes to the full
// pipe would hang every call that prints.
func TestRawStdoutWritesNeitherBlockNorVanish(t *testing.T) {
	var logs syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	_, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour, StartOptions: pluginhost.StartOptions{Logger: logger}})
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "raw stdout"})
		cancel()
		if err != nil {
			t.Fatalf("a call writing to descriptor 1: %v", err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "wrote to descriptor 1 while serving"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the plugin's line written to descriptor 1 is not in the host's log; its end:\n%s", tail(logs.String(), 2000))
		}
	}
}

// tail answers the last n bytes of s.
func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// TestLateStartSaysItIsUp: an instance the boot stopped waiting for (a
// store migrating at an upgrade) was logged as still starting, its calls
// refused, and then, once up, nothing: an operator watching the log of an
// upgrade never read that it was over. Its start is logged when it ends.
func TestLateStartSaysItIsUp(t *testing.T) {
	dir, _ := echoDir(t)
	e := discoverOne(t, dir)
	var logs syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true, Level: hclog.Info})
	sup := pluginhost.New([]pluginhost.Entry{e}, pluginhost.Options{BootWait: 200 * time.Millisecond, HealthInterval: time.Hour,
		StartOptions: pluginhost.StartOptions{Dir: t.TempDir(), Logger: logger}})
	defer sup.Close()
	if err := sup.Start(context.Background(), []pluginhost.Spec{
		{Kind: sdk.KindProvider, Name: "late", Plugin: "echo", Config: json.RawMessage(`{"slow_ms":1500}`)},
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "still starting") {
		t.Fatalf("the boot did not say it stopped waiting:\n%s", logs.String())
	}
	waitStatus(t, sup, "late", "the late start", func(st pluginhost.Status) bool { return st.State == pluginhost.StateReady })
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "plugin started after the host began serving") {
		if time.Now().After(deadline) {
			t.Fatalf("the late start is up, and the log does not say so:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), `"instance":"late"`) || !strings.Contains(logs.String(), `"waited_ms"`) {
		t.Fatalf("the line does not name the instance and its wait:\n%s", logs.String())
	}
}

// TestPluginsDocShowsTheRefusals holds the refusals docs/plugins.md shows
// to the ones Start answers, but for the plugin's name, paths and digests:
// the page showed a changed executable's, script tree's and interpreter's
// refusal ending in "permission denied", which the host leaves out (the
// problem is said once), where it names the manifest.
func TestPluginsDocShowsTheRefusals(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(testbin.ModuleRoot(t), "docs", "plugins.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := func(intro string) []string {
		_, b, ok := strings.Cut(string(doc), intro+"\n\n```\n")
		b, _, _ = strings.Cut(b, "```")
		lines := strings.Split(strings.TrimSpace(b), "\n")
		if !ok || len(lines) != 2 {
			t.Fatalf("docs/plugins.md shows %d refusals after %q; want two", len(lines), intro)
		}
		return lines
	}
	compiled := block("Each refusal is one line naming the plugin, the file and what differs:")
	interpreted := block("Go plugins' one-liners, naming the file:")
	cases := []struct {
		line  string
		setup func(t *testing.T) (dir string)
	}{
		{compiled[0], func(t *testing.T) string {
			dir, _ := echoDir(t)
			f, err := os.OpenFile(filepath.Join(dir, "echo"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte{0})
			f.Close()
			return dir
		}},
		{compiled[1], func(t *testing.T) string {
			dir, manifest := echoDir(t)
			editManifest(t, manifest, func(m map[string]any) { m["version"] = "0.2.0" })
			return dir
		}},
		{interpreted[0], func(t *testing.T) string {
			dir := scriptTree(t, "")
			if err := os.WriteFile(filepath.Join(dir, "sqlitepy", "added.py"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
		{interpreted[1], func(t *testing.T) string { return scriptTree(t, strings.Repeat("0", 64)) }},
	}
	for _, c := range cases {
		// The page's plugins are markdown and sqlitepy under
		// /srv/memhost/plugins, run by /usr/bin/python3; the test's are
		// echo and sqlitepy in a temporary directory, run by the shell.
		pattern := regexp.QuoteMeta(c.line)
		pattern = strings.ReplaceAll(pattern, "9f2c…", "[0-9a-f]{64}")
		pattern = strings.ReplaceAll(pattern, "tree_sha256 …", "tree_sha256 [0-9a-f]{64}")
		pattern = strings.ReplaceAll(pattern, "/srv/memhost/plugins/", `\S*/`)
		pattern = strings.ReplaceAll(pattern, "/usr/bin/python3", `/\S+`)
		pattern = strings.ReplaceAll(pattern, "memhost-plugin-markdown", "echo")
		pattern = strings.ReplaceAll(pattern, "markdown", "echo")
		re := regexp.MustCompile("^" + pattern + "$")
		t.Setenv("TMPDIR", testbin.ShortTempDir(t))
		dir := c.setup(t)
		conn, err := pluginhost.Start(context.Background(), discoverOne(t, dir), pluginhost.StartOptions{StartTimeout: 5 * time.Second})
		if err == nil {
			conn.Close()
			t.Fatalf("Start succeeded; the page shows %s", c.line)
		}
		if !re.MatchString(err.Error()) {
			t.Errorf("docs/plugins.md shows\n%s\nStart answers\n%s", c.line, err)
		}
	}
}

// scriptTree writes a plugin directory holding the script tree sqlitepy,
// run by the shell, and its manifest; interpreterSHA, when set, is the
// interpreter's digest the manifest gives in place of the real one.
func scriptTree(t *testing.T, interpreterSHA string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sqlitepy"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "sqlitepy", "main.py")
	if err := os.WriteFile(script, []byte("exit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	scriptSHA, err := pluginhost.FileSHA256(script)
	if err != nil {
		t.Fatal(err)
	}
	if interpreterSHA == "" {
		if interpreterSHA, err = pluginhost.FileSHA256(sh); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := host.TreeDigest(filepath.Join(dir, "sqlitepy"))
	if err != nil {
		t.Fatal(err)
	}
	manifest, _ := json.Marshal(map[string]any{
		"format": 2, "name": "sqlitepy", "version": "0.1.0", "kinds": []string{"provider"}, "protocols": []int{1},
		"executable": "sqlitepy/main.py", "sha256": scriptSHA,
		"interpreter": map[string]any{"path": sh, "sha256": interpreterSHA},
		"tree":        "sqlitepy", "tree_sha256": fmt.Sprintf("%x", tree),
	})
	if err := os.WriteFile(filepath.Join(dir, "sqlitepy.plugin.json"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
