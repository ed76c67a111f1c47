package pluginhost_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
			editManifest(t, manifest, func(m map[string]any) { m["format"] = 2 })
		}, `format 2 is not one this memhost reads`},
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
		})
	}
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
		}, "kinds: manifest [provider selector], plugin [provider]"},
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
		})
	}
}

func startEcho(t *testing.T, opts pluginhost.Options) (*pluginhost.Supervisor, sdk.Provider) {
	t.Helper()
	dir, _ := echoDir(t)
	e := discoverOne(t, dir)
	opts.Logger = hclog.NewNullLogger()
	sup := pluginhost.New([]pluginhost.Entry{e}, opts)
	if err := sup.Start(context.Background(), []pluginhost.Spec{{Kind: sdk.KindProvider, Name: "main", Plugin: "echo"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sup.Close)
	p, err := sup.Provider("main")
	if err != nil {
		t.Fatal(err)
	}
	return sup, p
}

func TestSupervisorRecoversKilledPlugin(t *testing.T) {
	sup, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour})
	ctx := context.Background()
	if _, err := p.(sdk.RecordWriter).Remember(ctx, "default", []sdk.Record{{Scope: "realm", Kind: sdk.KindFact, Title: "x"}}); err != nil {
		t.Fatal(err)
	}
	pid := sup.Status()[0].Pid
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExited(t, pid)
	// The read finds the process dead, restarts it and retries once.
	if _, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "x"}); err != nil {
		t.Fatalf("recall after kill: %v", err)
	}
	st := sup.Status()[0]
	if st.Restarts != 1 || !st.Healthy || st.Pid == pid {
		t.Fatalf("status after recovery = %+v, want 1 restart, healthy, new pid", st)
	}
}

func TestSupervisorCrashMidCall(t *testing.T) {
	sup, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour})
	ctx := context.Background()
	// A write is not retried: it fails with a typed error...
	_, err := p.(sdk.RecordWriter).Remember(ctx, "default", []sdk.Record{{Scope: "realm", Kind: sdk.KindFact, Title: "crash"}})
	if !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("write to a plugin that crashed mid-call: err = %v, want ErrUnavailable", err)
	}
	// ...and the next call recovers on a fresh process.
	if _, err := p.(sdk.RecordWriter).Remember(ctx, "default", []sdk.Record{{Scope: "realm", Kind: sdk.KindFact, Title: "fine"}}); err != nil {
		t.Fatalf("next call after crash: %v", err)
	}
	// A second crash soon after the first waits out a backoff: it fails
	// fast with a typed error instead of restarting in a tight loop.
	if _, err := p.(sdk.RecordWriter).Remember(ctx, "default", []sdk.Record{{Scope: "realm", Kind: sdk.KindFact, Title: "crash"}}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("second crash: err = %v", err)
	}
	if st := sup.Status()[0]; st.Restarts != 1 {
		t.Fatalf("restarts = %d, want 1", st.Restarts)
	}
}

func TestSupervisorHealthLoopRestarts(t *testing.T) {
	sup, _ := startEcho(t, pluginhost.Options{HealthInterval: 20 * time.Millisecond})
	pid := sup.Status()[0].Pid
	syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := sup.Status()[0]
		if st.Healthy && st.Restarts == 1 && st.Pid != pid {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("health loop did not restart the plugin: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
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
	case <-time.After(30 * time.Second):
		t.Fatal("a hung plugin hung the caller past its deadline")
	}
}

func TestSupervisorUndeclaredCapability(t *testing.T) {
	_, p := startEcho(t, pluginhost.Options{HealthInterval: time.Hour})
	if sdk.Supports(p, sdk.CapFetch) {
		t.Fatal("echo does not declare fetch")
	}
	// The supervised provider implements only what the plugin declared, so
	// a type assertion answers as truthfully as Supports.
	if _, ok := p.(sdk.RecordGetter); ok {
		t.Fatal("the supervised provider implements Get, which echo does not declare")
	}
	if _, ok := p.(sdk.RecordWriter); !ok {
		t.Fatal("the supervised provider does not implement Remember, which echo declares")
	}
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
		sup := pluginhost.New([]pluginhost.Entry{e}, pluginhost.Options{StartOptions: pluginhost.StartOptions{Logger: hclog.NewNullLogger()}})
		err := sup.Start(context.Background(), []pluginhost.Spec{c.spec})
		sup.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("pluginhost.Start(%+v) = %v, want error containing %q", c.spec, err, c.want)
		}
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
