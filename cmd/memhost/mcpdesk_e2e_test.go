package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/internal/mcpserver"
	"github.com/memhost/memhost/internal/testbin"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioMCP connects an MCP client to `memhost mcp args...` run in dir
// with env added, as a desktop agent starts it.
func stdioMCP(t *testing.T, ctx context.Context, dir string, env []string, args ...string) (*mcp.ClientSession, *strings.Builder) {
	t.Helper()
	cmd := testbin.Command(testbin.Build(t, "./cmd/memhost"), append([]string{"mcp"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to memhost mcp %v: %v\n%s", args, err, stderr)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, stderr
}

// TestMCPDataDir: an agent starts `memhost mcp` in any directory; without
// --config its data goes to the user's data directory, never the working
// directory, and --data-dir wins over both.
func TestMCPDataDir(t *testing.T) {
	t.Parallel()
	pluginDir := testbin.PluginDir(t, "sqlite", "template")
	cases := []struct {
		name string
		env  func(home, xdg, flagDir string) []string
		args func(flagDir string) []string
		want func(home, xdg, flagDir string) string
	}{
		{"XDG_DATA_HOME",
			func(home, xdg, _ string) []string { return []string{"HOME=" + home, "XDG_DATA_HOME=" + xdg} },
			func(string) []string { return nil },
			func(_, xdg, _ string) string { return filepath.Join(xdg, "memhost") }},
		{"HOME without XDG_DATA_HOME",
			func(home, _, _ string) []string { return []string{"HOME=" + home, "XDG_DATA_HOME="} },
			func(string) []string { return nil },
			func(home, _, _ string) string { return filepath.Join(home, ".local", "share", "memhost") }},
		{"--data-dir",
			func(home, xdg, _ string) []string { return []string{"HOME=" + home, "XDG_DATA_HOME=" + xdg} },
			func(flagDir string) []string { return []string{"--data-dir", flagDir} },
			func(_, _, flagDir string) string { return flagDir }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			home, xdg, flagDir, work := filepath.Join(root, "home"), filepath.Join(root, "xdg"), filepath.Join(root, "flag"), filepath.Join(root, "work")
			for _, d := range []string{home, work} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			args := append([]string{"--identity", "alice", "--plugin-dir", pluginDir}, c.args(flagDir)...)
			cs, stderr := stdioMCP(t, ctx, work, c.env(home, xdg, flagDir), args...)
			var stored struct{ ID string }
			if res := callTool(t, ctx, cs, mcpserver.ToolRemember, map[string]any{"title": "Where", "body": "in the user's data directory"}, &stored); res.IsError || stored.ID == "" {
				t.Fatalf("remember: %s\n%s", toolText(res), stderr)
			}
			want := c.want(home, xdg, flagDir)
			if _, err := os.Stat(filepath.Join(want, "memhost-state.db")); err != nil {
				t.Fatalf("no state in %s: %v\n%s", want, err, stderr)
			}
			if entries, _ := os.ReadDir(work); len(entries) != 0 {
				t.Fatalf("memhost mcp wrote into its working directory: %v", entries)
			}
		})
	}
}

// TestMCPBesideServe: `memhost mcp` on the data directory a server holds
// is refused with the fix named, and `memhost mcp --addr` serves the
// server's tools on stdio, with the token from MEMHOST_TOKEN.
func TestMCPBesideServe(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfig(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+`
realm "default" { provider = "main" }
token "agent" {
  secret_env = "MEMHOST_TEST_TOKEN"
  realms     = ["default"]
}
`)
	m, err := startWithConfig(t, cfgPath, dataDir, "MEMHOST_TEST_TOKEN="+mcpTestToken)
	if err != nil {
		t.Fatal(err)
	}
	m.token = mcpTestToken

	t.Run("same data directory", func(t *testing.T) {
		out, err := runCLI(t, []string{"MEMHOST_TEST_TOKEN=" + mcpTestToken, "MEMHOST_TOKEN=" + mcpTestToken}, "mcp", "--config", cfgPath, "--identity", "alice")
		// The address the server answers on (--listen overrides the
		// config's), not the config's.
		if err == nil || !strings.Contains(err.Error(), "in use by another memhost") || !strings.Contains(err.Error(), "memhost mcp --addr "+m.base+" ") {
			t.Fatalf("mcp on a served data directory: %q, %v; want it to name %s", out, err, m.base)
		}
	})

	// From an outside review: a one-shot command without --addr dialled
	// the config's listen address, where nothing answered, though the
	// server had noted its own in the data directory.
	t.Run("a one-shot command finds the server", func(t *testing.T) {
		out, err := runCLI(t, []string{"MEMHOST_TEST_TOKEN=" + mcpTestToken, "MEMHOST_TOKEN=" + mcpTestToken}, "recall", "--config", cfgPath, "--identity", "alice", "anything")
		if err != nil {
			t.Fatalf("recall beside the server, without --addr: %q, %v", out, err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, stderr := stdioMCP(t, ctx, t.TempDir(), []string{"MEMHOST_TOKEN=" + mcpTestToken}, "--addr", m.base, "--identity", "alice")
	exerciseMemoryTools(t, ctx, cs)
	// The proxy wrote through the server: its API recalls the record.
	var stored struct{ ID string }
	if res := callTool(t, ctx, cs, mcpserver.ToolRemember, map[string]any{"title": "Through the server", "body": "proxied rhododendron note"}, &stored); res.IsError {
		t.Fatalf("remember: %s\n%s", toolText(res), stderr)
	}
	if got := recall(t, m, "alice", "rhododendron"); len(got.Hits) != 1 || got.Hits[0].Record.ID != stored.ID {
		t.Fatalf("the server does not recall what memhost mcp --addr remembered: %+v", got)
	}

	// A tool or prompt the proxy does not know is refused as the server
	// refuses it: the name it quotes is rendered, never handed back live.
	refusal := func(what string, err error) string {
		var wire *jsonrpc.Error
		if !errors.As(err, &wire) {
			t.Fatalf("%s: %v, want the server's refusal", what, err)
		}
		return wire.Message
	}
	for _, f := range forgeries {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: f, Arguments: map[string]any{}})
		coordinatortest.CheckModelText(t, envHeader, refusal("tool "+f, err))
		_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: f})
		coordinatortest.CheckModelText(t, envHeader, refusal("prompt "+f, err))
		// An unknown resource's refusal quotes its uri in its data.
		_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: f})
		coordinatortest.CheckModelText(t, envHeader, refusal("resource "+f, err))
		var wire *jsonrpc.Error
		if errors.As(err, &wire) && len(wire.Data) > 0 {
			for _, s := range jsonStrings(t, wire.Data) {
				coordinatortest.CheckModelText(t, envHeader, s)
			}
		}
	}

	t.Run("no token", func(t *testing.T) {
		out, err := runCLI(t, []string{"MEMHOST_TOKEN="}, "mcp", "--addr", m.base, "--identity", "alice")
		if err == nil || !strings.Contains(err.Error(), "MEMHOST_TOKEN") {
			t.Fatalf("mcp --addr without a token: %q, %v", out, err)
		}
	})
}

// TestNothingListeningNamesTheFix: a client command or `memhost mcp
// --addr` pointed where no memhost listens says how to start one.
func TestNothingListeningNamesTheFix(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"recall", "--identity", "alice", "--addr", addr, "x"}, "--local"},
		{[]string{"mcp", "--identity", "alice", "--addr", addr}, "no --addr"},
	} {
		out, err := runCLI(t, nil, c.args...)
		if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "memhost serve") || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%v: %q, %v", c.args, out, err)
		}
	}
}

// TestClientNeedsOnlyItsToken: a client command reading the server's
// config file needs MEMHOST_TOKEN alone, not the variables holding every
// token's secret; without it the 401 names MEMHOST_TOKEN, as --help does.
func TestClientNeedsOnlyItsToken(t *testing.T) {
	t.Parallel()
	const other = "other-token-0123456789abcdef0123"
	cfgPath, dataDir := writeConfig(t, markdownConfig+`
token "agent" {
  secret_env = "MEMHOST_TEST_TOKEN"
  realms     = ["default"]
}
token "ops" {
  secret_env = "MEMHOST_TEST_OTHER"
  realms     = ["default"]
  role       = "application"
}
`)
	m, err := startWithConfig(t, cfgPath, dataDir, "MEMHOST_TEST_TOKEN="+mcpTestToken, "MEMHOST_TEST_OTHER="+other)
	if err != nil {
		t.Fatal(err)
	}
	// The config says where the server listens.
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(m.base, "http://")
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(string(data), `listen = "127.0.0.1:0"`, `listen = "`+addr+`"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	noSecrets := []string{"MEMHOST_TEST_TOKEN=", "MEMHOST_TEST_OTHER="}
	exerciseOneShot(t, append(noSecrets, "MEMHOST_TOKEN="+mcpTestToken), false, "--config", cfgPath)
	for _, c := range []struct{ token, want string }{
		{"", "set MEMHOST_TOKEN"},
		{"wrong-token-0123456789abcdef0123", "MEMHOST_TOKEN holds no token"},
	} {
		out, err := runCLI(t, append(noSecrets, "MEMHOST_TOKEN="+c.token), "recall", "--config", cfgPath, "--identity", "alice", "x")
		if err == nil || !strings.Contains(err.Error(), "unauthenticated") || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("token %q: %q, %v", c.token, out, err)
		}
	}
	help, err := runCLI(t, nil, "recall", "--help")
	if err != nil || !strings.Contains(help, "MEMHOST_TOKEN") {
		t.Fatalf("recall --help does not name MEMHOST_TOKEN: %v\n%s", err, help)
	}
}

// TestMCPStaleServingAddr: a serving.addr a killed server left behind
// (kill -9 runs no cleanup) is not named as the address of whatever
// holds the data directory now: nothing answers there.
func TestMCPStaleServingAddr(t *testing.T) {
	t.Parallel()
	pluginDir := testbin.PluginDir(t, "sqlite", "template")
	root := t.TempDir()
	dataDir := filepath.Join(root, "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	const stale = "127.0.0.1:1"
	if err := os.WriteFile(filepath.Join(dataDir, "serving.addr"), []byte(stale+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := []string{"HOME=" + root, "XDG_DATA_HOME=" + root}
	cs, stderr := stdioMCP(t, ctx, root, env, "--identity", "alice", "--plugin-dir", pluginDir, "--data-dir", dataDir)
	if res := callTool(t, ctx, cs, mcpserver.ToolRemember, map[string]any{"title": "Held", "body": "the data directory is held"}, nil); res.IsError {
		t.Fatalf("remember: %s\n%s", toolText(res), stderr)
	}
	out, err := runCLI(t, env, "mcp", "--identity", "alice", "--plugin-dir", pluginDir, "--data-dir", dataDir)
	if err == nil || !strings.Contains(err.Error(), "in use by another memhost") {
		t.Fatalf("mcp on a held data directory: %q, %v", out, err)
	}
	if strings.Contains(err.Error(), stale) {
		t.Fatalf("mcp names the address a dead server noted: %v", err)
	}
}

// TestAStaleServingAddrGetsNoToken: from an outside review. The client
// commands read the address a serve notes in its data directory; a killed
// serve's note stays until the next start, and may name a port another
// process took since. The note is read only while a memhost holds the
// directory, so that process is never sent the token.
func TestAStaleServingAddrGetsNoToken(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, "not memhost", http.StatusTeapot)
	}))
	t.Cleanup(other.Close)
	cfgPath, dataDir := writeConfig(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+`realm "default" { provider = "main" }`)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, servingAddrFile), []byte(strings.TrimPrefix(other.URL, "http://")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := runCLI(t, []string{"MEMHOST_TOKEN=secret-token-of-alice"}, "recall", "--config", cfgPath, "--identity", "alice", "anything")
	if err == nil {
		t.Fatal("recall answered with no memhost serving")
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the process at a killed serve's noted address was sent %d requests", n)
	}
}

// TestMCPHangupStopsCleanly: SIGHUP (the terminal `memhost mcp` was
// started in closing) stops it as SIGTERM does, its plugins and session
// journal closed; by default it ended the process on the spot, as it did
// serve's.
func TestMCPHangupStopsCleanly(t *testing.T) {
	t.Parallel()
	cmd := testbin.Command(testbin.Build(t, "./cmd/memhost"), "mcp", "--identity", "alice",
		"--data-dir", t.TempDir(), "--plugin-dir", testbin.PluginDir(t, "sqlite", "template"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	ready := started
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if started != nil && strings.Contains(sc.Text(), "plugins started") {
				close(started)
				started = nil
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("memhost mcp did not start its plugins within 30s")
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !waitExit(cmd, 30*time.Second) {
		t.Fatal("memhost mcp did not stop within 30s of SIGHUP")
	}
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() {
		t.Fatalf("memhost mcp was ended by %v, not stopped cleanly", ws.Signal())
	}
	// A stop asked for is no failure ("memhost: context canceled", exit 1).
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("memhost mcp exit code after SIGHUP = %d, want 0", code)
	}
}

// waitExit waits up to d for the started cmd to exit, and reports whether
// it did; one that did not is killed and waited for.
func waitExit(cmd *exec.Cmd, d time.Duration) bool {
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		return false
	}
}

// TestMCPProxyKeepsItsToolsAfterARefusal: the server refuses some calls
// over HTTP (a repeated name, values nested too deep, a body over
// max_body_bytes). From an outside review: memhost mcp --addr passed
// such a refusal to its MCP client, which took it for a broken
// connection and failed every later call ("connection closed"), so one
// careless call cost the agent its memory tools until it restarted. Each
// is answered as the call's error, in the server's words, and the next
// call is served.
func TestMCPProxyKeepsItsToolsAfterARefusal(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+`
server { max_body_bytes = 4096 }
realm "default" { provider = "main" }
token "agent" {
  secret_env = "MEMHOST_TEST_TOKEN"
  realms     = ["default"]
}
`, "MEMHOST_TEST_TOKEN="+mcpTestToken)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, stderr := stdioMCP(t, ctx, t.TempDir(), []string{"MEMHOST_TOKEN=" + mcpTestToken}, "--addr", m.base, "--identity", "alice")
	for _, c := range []struct {
		name, args, want string
	}{
		{"a repeated name", `{"query":"x","query":"y"}`, "appears more than once"},
		{"values nested too deep", `{"query":"x","tags":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, "deep"},
		{"a body over max_body_bytes", `{"query":"` + strings.Repeat("x", 8192) + `"}`, "limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolRecall, Arguments: json.RawMessage(c.args)})
			var wire *jsonrpc.Error
			if !errors.As(err, &wire) || !strings.Contains(wire.Message, c.want) {
				t.Fatalf("refused call: %v, want the server's refusal saying %q\n%s", err, c.want, stderr)
			}
			if res := callTool(t, ctx, cs, mcpserver.ToolRecall, map[string]any{"query": "anything"}, nil); res.IsError {
				t.Fatalf("the call after the refusal: %s", toolText(res))
			}
		})
	}
}

// TestMCPProxyRendersByTheServersHeader: memhost mcp --addr answers some
// refusals itself (an unknown method, quoted as sent) and renders them
// for the model. From an outside review: it rendered them by the default
// instruction header, whatever the server's, so under a custom header a
// forged header line came back live (and the default's defanged where the
// server leaves it). It renders by the header the server's initialize
// answer names, as the server's own /mcp does.
func TestMCPProxyRendersByTheServersHeader(t *testing.T) {
	t.Parallel()
	const (
		custom  = "Team notes for identity `bob` in realm `default`:"
		builtin = "Agent memory for identity `bob` in realm `default`:"
	)
	cases := []struct {
		name, coordinator string
		defanged          map[string]bool // method name → whether its refusal is defanged
	}{
		{"custom header", `coordinator { instruction_header = "Team notes" }`, map[string]bool{custom: true, builtin: false}},
		{"default header", ``, map[string]bool{custom: false, builtin: true}},
		{"defanging off", `coordinator {
  instruction_header = "Team notes"
  defang_inbound     = false
}`, map[string]bool{custom: false, builtin: false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+`
realm "default" { provider = "main" }
token "agent" {
  secret_env = "MEMHOST_TEST_TOKEN"
  realms     = ["default"]
}
`+c.coordinator, "MEMHOST_TEST_TOKEN="+mcpTestToken)
			send, reply := rawProxy(t, m.base)
			send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
			reply()
			send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			for method, defanged := range c.defanged {
				name, _ := json.Marshal(method)
				send(`{"jsonrpc":"2.0","id":2,"method":` + string(name) + `,"params":{}}`)
				var ans struct {
					Error *jsonrpc.Error `json:"error"`
				}
				data := reply()
				if err := json.Unmarshal(data, &ans); err != nil || ans.Error == nil {
					t.Fatalf("%s: not an error: %s", method, data)
				}
				if got := strings.Contains(ans.Error.Message, "[defanged]"); got != defanged {
					t.Errorf("%s: defanged %v, want %v: %s", method, got, defanged, ans.Error.Message)
				}
			}
		})
	}
}

// rawProxy starts memhost mcp --addr base with the test token and answers
// a function writing one line to it and one answering its next response.
func rawProxy(t *testing.T, base string) (send func(string), reply func() []byte) {
	t.Helper()
	cmd := testbin.Command(testbin.Build(t, "./cmd/memhost"), "mcp", "--addr", base, "--identity", "bob")
	cmd.Env = append(os.Environ(), "MEMHOST_TOKEN="+mcpTestToken)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		waitExit(cmd, 30*time.Second)
	})
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	send = func(msg string) {
		if _, err := io.WriteString(stdin, msg+"\n"); err != nil {
			t.Fatalf("write: %v\n%s", err, stderr)
		}
	}
	reply = func() []byte {
		for lines.Scan() {
			var msg struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(lines.Bytes(), &msg) == nil && len(msg.ID) > 0 {
				return lines.Bytes()
			}
		}
		t.Fatalf("no reply: %v\n%s", lines.Err(), stderr)
		return nil
	}
	return send, reply
}
