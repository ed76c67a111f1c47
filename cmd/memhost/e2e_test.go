package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/apispec"
	"github.com/memhost/memhost/internal/pgtest"
	"github.com/memhost/memhost/internal/testbin"
)

func TestMain(m *testing.M) {
	code := testbin.Main(m)
	pgtest.StopShared()
	os.Exit(code)
}

var (
	specOnce sync.Once
	spec     *apispec.Spec
	specErr  error
)

// apiSpec is docs/openapi.yaml, loaded once.
func apiSpec(t testing.TB) *apispec.Spec {
	t.Helper()
	specOnce.Do(func() { spec, specErr = apispec.Load(filepath.Join(testbin.ModuleRoot(t), "docs", "openapi.yaml")) })
	if specErr != nil {
		t.Fatal(specErr)
	}
	return spec
}

// instance is one real `memhost serve` process under test.
type instance struct {
	t       testing.TB
	cmd     *exec.Cmd
	base    string
	dataDir string
	mu      sync.Mutex
	stderr  bytes.Buffer
	drained chan struct{} // closed once stderr is read to its end
	token   string
}

// listeningRE finds the address in the text or the JSON log format.
var listeningRE = regexp.MustCompile(`memhost listening: addr=(\S+)|"memhost listening".*"addr":"([^"]+)"`)

// startMemhost writes body (HCL) into a config with a fresh plugin and data
// directory, starts `memhost serve`, and waits until it listens.
func startMemhost(t *testing.T, body string, env ...string) *instance {
	t.Helper()
	return startMemhostIn(t, testbin.PluginDir(t), body, env...)
}

// startMemhostIn is startMemhost on the plugins of pluginDir.
func startMemhostIn(t *testing.T, pluginDir, body string, env ...string) *instance {
	t.Helper()
	cfgPath, dataDir := writeConfigIn(t, pluginDir, body)
	inst, err := startWithConfig(t, cfgPath, dataDir, env...)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

func writeConfig(t testing.TB, body string) (path, dataDir string) {
	t.Helper()
	return writeConfigIn(t, testbin.PluginDir(t), body)
}

func writeConfigIn(t testing.TB, pluginDir, body string) (path, dataDir string) {
	t.Helper()
	dir := t.TempDir()
	dataDir = filepath.Join(dir, "data")
	cfg := fmt.Sprintf("listen = \"127.0.0.1:0\"\nplugin_dir = %q\ndata_dir = %q\n%s", pluginDir, dataDir, withTestRecallTimeout(body))
	path = filepath.Join(dir, "memhost.hcl")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, dataDir
}

// testRecallTimeout replaces the 500 ms production recall deadline in
// every test config that does not set its own: on a machine kept busy
// (make test's suites side by side, other work) a recall can take longer,
// and a test not about deadlines must not turn on the machine's load.
const testRecallTimeout = "recall_timeout_ms = 20000"

func withTestRecallTimeout(body string) string {
	switch {
	case strings.Contains(body, "recall_timeout_ms"):
		return body
	case strings.Contains(body, "coordinator {\n"):
		// Last in the block: the lines a test reads errors at stay put.
		start := strings.Index(body, "coordinator {\n")
		end := start + strings.Index(body[start:], "\n}")
		return body[:end] + "\n  " + testRecallTimeout + body[end:]
	case oneLineCoordinator.MatchString(body):
		return oneLineCoordinator.ReplaceAllString(body, "coordinator {\n  "+testRecallTimeout+"\n  $1\n}")
	default:
		return body + "\ncoordinator {\n  " + testRecallTimeout + "\n}\n"
	}
}

var oneLineCoordinator = regexp.MustCompile(`coordinator \{ ([^\n{}]*) \}`)

func tryStartMemhost(t *testing.T, body string, env ...string) (*instance, error) {
	t.Helper()
	cfgPath, dataDir := writeConfig(t, body)
	return startWithConfig(t, cfgPath, dataDir, env...)
}

func startWithConfig(t testing.TB, cfgPath, dataDir string, env ...string) (*instance, error) {
	t.Helper()
	return startServe(t, dataDir, []string{"--config", cfgPath}, env)
}

// startWithArgs starts `memhost serve --config cfgPath args...`.
func startWithArgs(t *testing.T, cfgPath, dataDir string, args ...string) (*instance, error) {
	t.Helper()
	return startServe(t, dataDir, append([]string{"--config", cfgPath}, args...), nil)
}

func startServe(t testing.TB, dataDir string, args, env []string) (*instance, error) {
	t.Helper()
	inst := &instance{t: t, dataDir: dataDir, drained: make(chan struct{})}
	inst.cmd = testbin.Command(testbin.Build(t, "./cmd/memhost"), append([]string{"serve"}, args...)...)
	inst.cmd.Env = append(os.Environ(), env...)
	pipe, err := inst.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inst.stop)
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			inst.mu.Lock()
			inst.stderr.WriteString(line + "\n")
			inst.mu.Unlock()
			if m := listeningRE.FindStringSubmatch(line); m != nil && !sent {
				addr <- m[1] + m[2]
				sent = true
			}
		}
		close(addr)
		close(inst.drained)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			inst.cmd.Wait()
			return nil, fmt.Errorf("memhost exited before listening: %s", inst.logs())
		}
		inst.base = "http://" + a
		return inst, nil
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("memhost did not start listening within 60s: %s", inst.logs())
	}
}

func (i *instance) logs() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.stderr.String()
}

// stop ends memhost and reads its stderr to the end before Wait, which
// closes the pipe: the last lines (a plugin's exit, say) were lost to a
// test that read the logs after stop.
func (i *instance) stop() {
	if i.cmd.ProcessState == nil {
		i.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-i.drained:
		case <-time.After(15 * time.Second):
			i.cmd.Process.Kill()
			select {
			case <-i.drained:
			case <-time.After(15 * time.Second):
			}
		}
		i.cmd.Wait()
	}
}

// do sends a JSON request and decodes a JSON answer into out (if non-nil).
func (i *instance) do(method, path string, body any, out any) int {
	i.t.Helper()
	return i.doWith(method, path, body, out, nil)
}

// doWith is do that shows the response to seen (when not nil) first.
func (i *instance) doWith(method, path string, body any, out any, seen func(*http.Response)) int {
	i.t.Helper()
	var sent []byte
	switch b := body.(type) {
	case nil:
	case string:
		sent = []byte(b)
	case []byte:
		sent = b
	default:
		data, err := json.Marshal(b)
		if err != nil {
			i.t.Fatal(err)
		}
		sent = data
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(sent)
	}
	req, err := http.NewRequest(method, i.base+path, rd)
	if err != nil {
		i.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if i.token != "" {
		req.Header.Set("Authorization", "Bearer "+i.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		i.t.Fatalf("%s %s: %v\nlogs:\n%s", method, path, err, i.logs())
	}
	defer resp.Body.Close()
	if seen != nil {
		seen(resp)
	}
	data, _ := io.ReadAll(resp.Body)
	// Every exchange of the e2e tests is held to docs/openapi.yaml.
	if err := apiSpec(i.t).Check(req, sent, resp.StatusCode, resp.Header, data); err != nil {
		i.t.Errorf("%v\nanswer: %s", err, data)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			i.t.Fatalf("%s %s: decode %q: %v", method, path, data, err)
		}
	}
	return resp.StatusCode
}

type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}

type pluginsAnswer struct {
	Plugins []struct {
		Instance string `json:"instance"`
		Name     string `json:"name"`
		Healthy  bool   `json:"healthy"`
		Restarts int    `json:"restarts"`
		Pid      int    `json:"pid"`
	} `json:"plugins"`
}

const markdownConfig = `
provider "notes" {
  plugin = "markdown"
  config = { root = "md" }
}
realm "default" { provider = "notes" }
`

func remember(t testing.TB, m *instance, records ...map[string]any) []string {
	t.Helper()
	var out struct {
		IDs []string `json:"ids"`
		apiError
	}
	if code := m.do("POST", "/v1/records", map[string]any{"records": records}, &out); code != 200 || len(out.IDs) != len(records) {
		t.Fatalf("POST /v1/records = %d ids %v error %+v\n%s", code, out.IDs, out.Error, m.logs())
	}
	return out.IDs
}

type recallAnswer struct {
	Hits []struct {
		Record struct {
			ID    string `json:"id"`
			Title string `json:"title"`
			Body  string `json:"body"`
		} `json:"record"`
		Score float64 `json:"score"`
	} `json:"hits"`
}

func recall(t *testing.T, m *instance, id, query string) recallAnswer {
	t.Helper()
	return recallWith(t, m, map[string]any{"identity": map[string]string{"id": id}, "query": query})
}

// recallWith posts body, a whole recall request, to /v1/recall.
func recallWith(t *testing.T, m *instance, body map[string]any) recallAnswer {
	t.Helper()
	var out recallAnswer
	if code := m.do("POST", "/v1/recall", body, &out); code != 200 {
		t.Fatalf("POST /v1/recall %v = %d\n%s", body, code, m.logs())
	}
	return out
}

// ids answers the hits' record ids, in rank order.
func (a recallAnswer) ids() []string {
	var out []string
	for _, h := range a.Hits {
		out = append(out, h.Record.ID)
	}
	return out
}

func TestRecordsRoundTrip(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, markdownConfig)
	ids := remember(t, m, map[string]any{
		"scope": "identity:alice", "kind": "preference", "title": "Coffee order",
		"body": "Alice drinks her espresso without sugar.", "tags": []string{"drinks"},
		"thread": map[string]any{"id": "conversation-1", "seq": 3},
	})
	hits := recall(t, m, "alice", "espresso sugar")
	if len(hits.Hits) != 1 || hits.Hits[0].Record.ID != ids[0] {
		t.Fatalf("recall = %+v, want the record %s", hits, ids[0])
	}
	// Another identity does not see alice's identity-scoped record.
	if other := recall(t, m, "bob", "espresso sugar"); len(other.Hits) != 0 {
		t.Fatalf("bob recalled alice's record: %+v", other)
	}
	// Remembering the same title and body again answers the same id.
	again := remember(t, m, map[string]any{"scope": "identity:alice", "kind": "preference", "title": "Coffee order", "body": "Alice drinks her espresso without sugar."})
	if again[0] != ids[0] {
		t.Fatalf("duplicate write got id %s, want %s", again[0], ids[0])
	}
	var rec map[string]any
	if code := m.do("GET", "/v1/records/"+ids[0], nil, &rec); code != 200 || rec["title"] != "Coffee order" ||
		!reflect.DeepEqual(rec["thread"], map[string]any{"id": "conversation-1", "seq": float64(3)}) {
		t.Fatalf("GET record = %d %v", code, rec)
	}
	if code := m.do("DELETE", "/v1/records/"+ids[0], nil, nil); code != 204 {
		t.Fatalf("DELETE = %d", code)
	}
	if code := m.do("DELETE", "/v1/records/"+ids[0], nil, nil); code != 204 {
		t.Fatalf("second DELETE = %d, want 204", code)
	}
	var e apiError
	if code := m.do("GET", "/v1/records/"+ids[0], nil, &e); code != 404 || e.Error.Code != "not_found" {
		t.Fatalf("GET after delete = %d %+v", code, e)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, markdownConfig+"server {\n  max_body_bytes = 200000\n}\n")
	good := map[string]any{"scope": "identity:alice", "kind": "fact", "title": "ok", "body": "fine"}
	cases := []struct {
		name   string
		method string
		path   string
		body   any
		status int
		code   string
		msg    string
	}{
		{"title over the limit", "POST", "/v1/records", map[string]any{"records": []any{good, map[string]any{"scope": "identity:alice", "kind": "fact", "title": strings.Repeat("t", 201), "body": "b"}}}, 413, "too_large", "records[1].title"},
		{"body over the limit", "POST", "/v1/records", map[string]any{"records": []any{map[string]any{"scope": "identity:alice", "kind": "fact", "title": "t", "body": strings.Repeat("b", 64<<10+1)}}}, 413, "too_large", "body"},
		{"request body over the limit", "POST", "/v1/records", map[string]any{"records": []any{map[string]any{"scope": "identity:alice", "kind": "fact", "title": "t", "body": strings.Repeat("b", 250000)}}}, 413, "too_large", "limit"},
		{"invalid utf-8", "POST", "/v1/records", []byte("{\"records\":[{\"scope\":\"identity:alice\",\"kind\":\"fact\",\"title\":\"t\xff\",\"body\":\"b\"}]}"), 400, "invalid_argument", "UTF-8"},
		{"unknown field", "POST", "/v1/records", map[string]any{"records": []any{map[string]any{"scope": "identity:alice", "kind": "fact", "title": "t", "bdy": "typo"}}}, 400, "invalid_argument", `records[0].bdy: unknown field`},
		{"unknown kind", "POST", "/v1/records", map[string]any{"records": []any{map[string]any{"scope": "identity:alice", "kind": "rumour", "title": "t"}}}, 400, "invalid_argument", "kind"},
		{"bad scope", "POST", "/v1/records", map[string]any{"records": []any{map[string]any{"scope": "team/../x", "kind": "fact", "title": "t"}}}, 400, "invalid_argument", "scope"},
		{"empty title and body", "POST", "/v1/records", map[string]any{"records": []any{map[string]any{"scope": "realm", "kind": "fact"}}}, 400, "invalid_argument", "empty"},
		{"path traversal id", "GET", "/v1/records/..%2F..%2Fetc%2Fpasswd", nil, 400, "invalid_argument", "id"},
		{"path traversal on delete", "DELETE", "/v1/records/..%2F..%2Fetc%2Fpasswd", nil, 400, "invalid_argument", "id"},
		{"bad realm", "GET", "/v1/records/abc?realm=..%2Fx", nil, 400, "invalid_argument", "realm"},
		{"not json", "POST", "/v1/recall", "identity=alice", 400, "invalid_argument", "must be a JSON object"},
		{"recall without identity", "POST", "/v1/recall", map[string]any{"query": "x"}, 400, "invalid_argument", "identity"},
		{"recall limit too large", "POST", "/v1/recall", map[string]any{"identity": map[string]string{"id": "alice"}, "query": "x", "limit": 100000}, 400, "invalid_argument", "limit"},
		{"unknown endpoint", "GET", "/v1/nothing", nil, 404, "not_found", "no such endpoint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e apiError
			code := m.do(c.method, c.path, c.body, &e)
			if code != c.status || e.Error.Code != c.code || !strings.Contains(e.Error.Message, c.msg) {
				t.Fatalf("%s %s = %d %+v, want %d %s containing %q", c.method, c.path, code, e, c.status, c.code, c.msg)
			}
		})
	}
	// Nothing was stored by any refused request, not even the good record
	// that shared a batch with a bad one.
	if got := recall(t, m, "alice", "ok fine"); len(got.Hits) != 0 {
		t.Fatalf("refused requests stored records: %+v", got)
	}
	var files []string
	filepath.Walk(m.dataDir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 0 {
		t.Fatalf("refused requests left files: %v", files)
	}
}

func pluginPids(t *testing.T, m *instance) []int {
	t.Helper()
	var p pluginsAnswer
	if code := m.do("GET", "/v1/plugins", nil, &p); code != 200 || len(p.Plugins) == 0 {
		t.Fatalf("GET /v1/plugins = %d %+v", code, p)
	}
	var pids []int
	for _, pl := range p.Plugins {
		if !pl.Healthy || pl.Pid == 0 {
			t.Fatalf("plugin not healthy: %+v", pl)
		}
		pids = append(pids, pl.Pid)
	}
	return pids
}

func TestPluginKilledMidRunRecovers(t *testing.T) {
	t.Parallel()
	// The recall waits for the restart: on a busy machine a plugin takes
	// longer than the default 500 ms recall deadline to start again.
	m := startMemhost(t, markdownConfig+"coordinator {\n  recall_timeout_ms = 25000\n}\n")
	ids := remember(t, m, map[string]any{"scope": "realm", "kind": "fact", "title": "Deploy window", "body": "Deploys happen on Tuesdays."})
	pid := pluginPids(t, m)[0]
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The next call finds the plugin dead, restarts it and answers; the
	// markdown files on disk survive the crash.
	got := recall(t, m, "carol", "deploys tuesdays")
	if len(got.Hits) != 1 || got.Hits[0].Record.ID != ids[0] {
		t.Fatalf("recall after kill = %+v", got)
	}
	var p pluginsAnswer
	m.do("GET", "/v1/plugins", nil, &p)
	if p.Plugins[0].Restarts != 1 || p.Plugins[0].Pid == pid {
		t.Fatalf("plugins after kill = %+v, want one restart and a new pid", p)
	}
}

// waitGone waits until the plugin processes of a killed host have exited.
func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("plugin pid %d outlived its killed host", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(data), ") Z ")
}

// TestNoPluginOutlivesKilledHost: when the host is killed with SIGKILL,
// each plugin notices, closes its store cleanly (sqlite checkpoints and
// removes its WAL) and removes its own socket directory, which no host is
// left to remove.
func TestNoPluginOutlivesKilledHost(t *testing.T) {
	t.Parallel()
	tmp := testbin.ShortTempDir(t)
	m := startMemhost(t, markdownConfig+`
provider "db" {
  plugin = "sqlite"
  config = { path = "memory.db" }
}
realm "acme" { provider = "db" }
`, "TMPDIR="+tmp)
	pids := pluginPids(t, m)
	sockets := func() []string {
		dirs, _ := filepath.Glob(filepath.Join(tmp, "mhsock-*"))
		return dirs
	}
	if len(sockets()) != len(pids) {
		t.Fatalf("want a socket directory per plugin in %s, got %v", tmp, sockets())
	}
	if code := m.do("POST", "/v1/records", map[string]any{"realm": "acme", "records": []map[string]any{
		{"scope": "realm", "kind": "fact", "title": "t", "body": "written just before the host dies"}}}, nil); code != 200 {
		t.Fatalf("POST /v1/records = %d\n%s", code, m.logs())
	}
	wal := filepath.Join(m.dataDir, "memory.db-wal")
	if _, err := os.Stat(wal); err != nil {
		t.Fatalf("the sqlite store has no WAL while open: %v", err)
	}
	if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m.cmd.Wait()
	waitGone(t, pids)
	// Closing checkpoints the WAL and empties it (the file stays: the WAL
	// is persistent, so a reopen on a full disk needs no new file); a
	// store that was not closed leaves the write in it.
	if fi, err := os.Stat(wal); err == nil && fi.Size() != 0 {
		t.Errorf("the sqlite plugin did not close its store (its WAL still holds %d bytes)", fi.Size())
	}
	if dirs := sockets(); len(dirs) > 0 {
		t.Errorf("plugins of a killed host left their sockets: %v", dirs)
	}
}

// TestNoPluginOutlivesAHostGoneBeforeItLooked: a host killed between
// starting a plugin and the plugin first reading its parent leaves the
// plugin re-parented from the start, so no change of parent ever shows;
// the host's pid it was started with does.
func TestNoPluginOutlivesAHostGoneBeforeItLooked(t *testing.T) {
	t.Parallel()
	bin, _ := testbin.Plugin(t, "sqlite")
	// A pid no process holds: a child run and reaped. The plugin's parent
	// (this test) lives on.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	sockets := testbin.ShortTempDir(t)
	cmd := testbin.Command(bin)
	cmd.Env = append(os.Environ(), "MEMHOST_PLUGIN_COOKIE=5f0c0a3e9d2b4c71a8e6f3b2d9c4e1a7", "PLUGIN_PROTOCOL_VERSIONS=1",
		"PLUGIN_UNIX_SOCKET_DIR="+sockets, "MEMHOST_HOST_PID="+strconv.Itoa(gone.Process.Pid))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the plugin ended with %v, want exit 0\n%s", err, &stderr)
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("the plugin outlived the host it was started by\n%s", &stderr)
	}
	if !strings.Contains(stderr.String(), "host process is gone") {
		t.Errorf("the plugin did not say why it exited:\n%s", &stderr)
	}
}

func TestNoPluginOutlivesStoppedHost(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, markdownConfig)
	pids := pluginPids(t, m)
	m.stop()
	if code := m.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("memhost exit code after SIGTERM = %d\n%s", code, m.logs())
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Fatalf("plugin pid %d survived a clean shutdown", pid)
		}
	}
}

// TestHangupStopsCleanly: SIGHUP (a closed terminal, a service manager's
// reload) drains and stops as SIGTERM does; by default it ended the
// process on the spot, plugins and session journal unclosed.
func TestHangupStopsCleanly(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, markdownConfig)
	pids := pluginPids(t, m)
	if err := m.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.drained:
	case <-time.After(30 * time.Second):
		t.Fatalf("memhost did not stop within 30s of SIGHUP\n%s", m.logs())
	}
	m.cmd.Wait()
	if code := m.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("memhost exit code after SIGHUP = %d\n%s", code, m.logs())
	}
	waitGone(t, pids)
}

func TestTokensBindRealms(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, markdownConfig+`
token "ops" {
  secret_env = "MEMHOST_TEST_TOKEN"
  realms     = ["default"]
}
`, "MEMHOST_TEST_TOKEN=s3cret-token-0123456789abcdef")
	var e apiError
	if code := m.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"id": "a"}, "query": "x"}, &e); code != 401 || e.Error.Code != "unauthenticated" {
		t.Fatalf("no token = %d %+v", code, e)
	}
	m.token = "wrong"
	if code := m.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"id": "a"}, "query": "x"}, &e); code != 401 {
		t.Fatalf("wrong token = %d", code)
	}
	m.token = "s3cret-token-0123456789abcdef"
	if code := m.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"realm": "acme", "id": "a"}, "query": "x"}, &e); code != 403 || e.Error.Code != "permission_denied" {
		t.Fatalf("other realm = %d %+v", code, e)
	}
	if code := m.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"id": "a"}, "query": "x"}, nil); code != 200 {
		t.Fatalf("allowed realm = %d", code)
	}
	if strings.Contains(m.logs(), "s3cret-token-0123456789abcdef") {
		t.Fatal("the token secret appeared in the logs")
	}
}

func TestServeRefusesBadSetup(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		body string
		env  []string
		want string
	}{
		{"unknown key", markdownConfig + "bogus_key = 1\n", nil, "memhost.hcl:"},
		{"bad value", markdownConfig + "log_format = \"xml\"\n", nil, "memhost.hcl:"},
		// writeConfig puts three lines before the body.
		{"unknown plugin", "provider \"main\" {\n  plugin = \"nosuch\"\n}\n", nil, `memhost.hcl:5,12-20: Unknown plugin; provider "main": no plugin named "nosuch"`},
		{"plugin of another kind", "selector \"pick\" {\n  plugin = \"sqlite\"\n}\n", nil, `memhost.hcl:5,12-20: Wrong plugin kind; selector "pick": plugin "sqlite" serves provider, not selector`},
		{"bad plugin config", "provider \"main\" {\n  plugin = \"markdown\"\n  config = { rooot = \"x\" }\n}\n", nil, "rooot"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfgPath, dataDir := writeConfig(t, c.body)
			out, err := testbin.Command(testbin.Build(t, "./cmd/memhost"), "serve", "--config", cfgPath).CombinedOutput()
			if err == nil {
				t.Fatalf("serve started with a bad setup:\n%s", out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Fatalf("output does not contain %q:\n%s", c.want, out)
			}
			// A refused config leaves no host key or state behind, which a
			// mistyped data_dir would otherwise scatter.
			if entries, err := os.ReadDir(dataDir); err == nil && len(entries) > 0 {
				t.Errorf("the refused start wrote into the data directory: %v", entries)
			}
		})
	}
	t.Run("missing plugin directory", func(t *testing.T) {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "memhost.hcl")
		os.WriteFile(cfg, []byte(fmt.Sprintf("plugin_dir = %q\ndata_dir = %q\n", filepath.Join(dir, "absent"), dir)), 0o644)
		out, err := testbin.Command(testbin.Build(t, "./cmd/memhost"), "serve", "--config", cfg).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "does not exist") {
			t.Fatalf("err %v, output:\n%s", err, out)
		}
	})
	t.Run("non-loopback listen without tokens", func(t *testing.T) {
		cfgPath, _ := writeConfig(t, markdownConfig)
		out, err := testbin.Command(testbin.Build(t, "./cmd/memhost"), "serve", "--config", cfgPath, "--listen", "0.0.0.0:0").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "token") {
			t.Fatalf("err %v, output:\n%s", err, out)
		}
	})
}

func TestPluginsVerify(t *testing.T) {
	t.Parallel()
	// Its own plugins: the test tampers with one.
	cfgPath, _ := writeConfigIn(t, testbin.PrivatePluginDir(t), markdownConfig)
	bin := testbin.Build(t, "./cmd/memhost")
	out, err := testbin.Command(bin, "plugins", "verify", "--config", cfgPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok      markdown") {
		t.Fatalf("verify on good plugins: %v\n%s", err, out)
	}
	list, err := testbin.Command(bin, "plugins", "list", "--config", cfgPath).CombinedOutput()
	if err != nil || !strings.Contains(string(list), "markdown") {
		t.Fatalf("list: %v\n%s", err, list)
	}
	data, _ := os.ReadFile(cfgPath)
	pluginDir := regexp.MustCompile(`plugin_dir = "([^"]+)"`).FindSubmatch(data)[1]
	// Without the default compactor's plugin, serve runs with compaction
	// off, and verify passes with the same warning (it refused).
	hidden := filepath.Join(t.TempDir(), "template.plugin.json")
	if err := os.Rename(filepath.Join(string(pluginDir), "template.plugin.json"), hidden); err != nil {
		t.Fatal(err)
	}
	out, err = testbin.Command(bin, "plugins", "verify", "--config", cfgPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok      markdown") || !strings.Contains(string(out), "compaction is off") || strings.Contains(string(out), "REFUSED") {
		t.Fatalf("verify without the default compactor's plugin: %v\n%s", err, out)
	}
	if err := os.Rename(hidden, filepath.Join(string(pluginDir), "template.plugin.json")); err != nil {
		t.Fatal(err)
	}
	// --plugin-dir instead of a config file (the built-in defaults: their
	// data directory is the working directory's memhost-data).
	for _, sub := range []string{"list", "verify"} {
		cmd := testbin.Command(bin, "plugins", sub, "--plugin-dir", string(pluginDir))
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "markdown") || !strings.Contains(string(out), "sqlite") {
			t.Fatalf("plugins %s --plugin-dir: %v\n%s", sub, err, out)
		}
	}
	// A config serve would refuse, verify refuses: a plugin that is not
	// there, and one of another kind.
	badCfg, _ := writeConfigIn(t, string(pluginDir), "provider \"main\" {\n  plugin = \"sqlit\"\n}\nselector \"pick\" {\n  plugin = \"markdown\"\n}\n")
	out, err = testbin.Command(bin, "plugins", "verify", "--config", badCfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `no plugin named "sqlit"`) || !strings.Contains(string(out), `plugin "markdown" serves provider, not selector`) {
		t.Fatalf("verify on a config naming a missing plugin and one of another kind: %v\n%s", err, out)
	}
	// Tamper with the markdown binary: verify refuses it, in one line.
	exe := filepath.Join(string(pluginDir), "memhost-plugin-markdown")
	f, _ := os.OpenFile(exe, os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte("tampered"))
	f.Close()
	out, err = testbin.Command(bin, "plugins", "verify", "--config", cfgPath).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "REFUSED plugin markdown") || !strings.Contains(string(out), "does not match manifest") {
		t.Fatalf("verify on tampered plugin: %v\n%s", err, out)
	}
}

// TestPluginsVerifyCounts: plugins verify's last line counts what it
// says it counts, and every problem it counts is a REFUSED line.
func TestPluginsVerifyCounts(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t, "./cmd/memhost")
	threeProblems := "provider \"main\" {\n  plugin = \"sqlit\"\n}\nselector \"pick\" {\n  plugin = \"markdown\"\n}\n" +
		"provider \"md\" {\n  plugin = \"markdown\"\n  config = { rooot = \"x\" }\n}\nrealm \"default\" {\n  provider = \"md\"\n}\n"
	cases := []struct {
		name    string
		missing bool   // the markdown executable is removed
		schema  string // the markdown manifest's config_schema, if set
		body    string
		want    string
		lines   int
	}{
		{"three config problems", false, "", threeProblems, "memhost: 3 config problem(s)\n", 3},
		{"a refused plugin and its instance", true, "", "provider \"main\" {\n  plugin = \"markdown\"\n}\n", "memhost: 1 plugin(s) refused, 1 config problem(s)\n", 2},
		// The schema's error quotes its causes one a line: still one
		// problem, not one per line.
		{"a config_schema the host cannot use", false, `{"type": 5}`, "provider \"main\" {\n  plugin = \"markdown\"\n}\n", "memhost: 1 config problem(s)\n", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := testbin.PrivatePluginDir(t, "markdown")
			if c.missing {
				if err := os.Remove(filepath.Join(dir, "memhost-plugin-markdown")); err != nil {
					t.Fatal(err)
				}
			}
			if c.schema != "" {
				path := filepath.Join(dir, "markdown.plugin.json")
				var m map[string]any
				if data, err := os.ReadFile(path); err != nil || json.Unmarshal(data, &m) != nil {
					t.Fatalf("read %s: %v", path, err)
				}
				m["config_schema"] = json.RawMessage(c.schema)
				data, _ := json.Marshal(m)
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfgPath, _ := writeConfigIn(t, dir, c.body)
			out, err := testbin.Command(bin, "plugins", "verify", "--config", cfgPath).CombinedOutput()
			if err == nil || !strings.HasSuffix(string(out), c.want) || strings.Count(string(out), "REFUSED ") != c.lines {
				t.Fatalf("want %d REFUSED lines and %q last:\n%s", c.lines, c.want, out)
			}
		})
	}
}

// TestRefusedPluginNamedInConfig: an instance whose plugin's manifest is
// in the plugin directory but was refused is told why, by serve and by
// plugins verify alike, not that there is no such plugin.
func TestRefusedPluginNamedInConfig(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t, "./cmd/memhost")
	cases := []struct {
		name   string
		refuse func(t *testing.T, dir string)
		reason string
	}{
		{"executable missing", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "memhost-plugin-markdown")); err != nil {
				t.Fatal(err)
			}
		}, "executable memhost-plugin-markdown: "},
		{"executable outside the directory", func(t *testing.T, dir string) {
			exe := filepath.Join(dir, "memhost-plugin-markdown")
			if err := os.Remove(exe); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/bin/sh", exe); err != nil {
				t.Fatal(err)
			}
		}, "outside the plugin directory"},
		{"two manifests claim the name", func(t *testing.T, dir string) {
			data, err := os.ReadFile(filepath.Join(dir, "markdown.plugin.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "copy.plugin.json"), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "2 manifests claim this name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := testbin.PrivatePluginDir(t, "markdown")
			c.refuse(t, dir)
			cfgPath, _ := writeConfigIn(t, dir, "provider \"main\" {\n  plugin = \"markdown\"\n}\n")
			want := fmt.Sprintf(`memhost.hcl:5,12-22: Refused plugin; provider "main": plugin "markdown" in the plugin directory %s was refused: `, dir)
			for _, args := range [][]string{{"serve"}, {"plugins", "verify"}} {
				out, err := testbin.Command(bin, append(args, "--config", cfgPath)...).CombinedOutput()
				if err == nil {
					t.Fatalf("%s passed:\n%s", args, out)
				}
				i := strings.Index(string(out), want)
				if i < 0 || !strings.Contains(string(out[i:]), c.reason) || strings.Contains(string(out), "no plugin named") {
					t.Fatalf("%s does not say the plugin was refused and why:\n%s", args, out)
				}
			}
		})
	}
}

// TestPluginsManifestKeepsAnotherPluginsManifest: the manifest is named
// for the name a binary reports, so a second binary reporting the same
// name would silently take the first one's manifest (and its instances,
// data and config at the next start). It is refused unless --force is
// given, and every replacement says what it replaced.
func TestPluginsManifestKeepsAnotherPluginsManifest(t *testing.T) {
	t.Parallel()
	pluginDir := t.TempDir()
	data, err := os.ReadFile(testbin.BuildIn(t, "examples/journal", "./cmd/memhost-plugin-journal"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"memhost-plugin-journal", "memhost-plugin-other"} {
		if err := os.WriteFile(filepath.Join(pluginDir, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	memhost := testbin.Build(t, "./cmd/memhost")
	manifest := filepath.Join(pluginDir, "journal.plugin.json")
	names := func() string {
		raw, err := os.ReadFile(manifest)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Executable string `json:"executable"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		return m.Executable
	}
	run := func(args ...string) (string, error) {
		out, err := testbin.Command(memhost, append([]string{"plugins", "manifest"}, args...)...).CombinedOutput()
		return string(out), err
	}
	for _, step := range []struct {
		args       []string
		fails      bool
		say        string
		executable string
	}{
		{[]string{filepath.Join(pluginDir, "memhost-plugin-journal")}, false, "wrote " + manifest, "memhost-plugin-journal"},
		// Same name, another executable: refused, the manifest kept.
		{[]string{filepath.Join(pluginDir, "memhost-plugin-other")}, true, "--force", "memhost-plugin-journal"},
		// A rebuild of the same executable replaces it, and says so.
		{[]string{filepath.Join(pluginDir, "memhost-plugin-journal")}, false, "replaced " + manifest + ", which named memhost-plugin-journal", "memhost-plugin-journal"},
		{[]string{"--force", filepath.Join(pluginDir, "memhost-plugin-other")}, false, "replaced " + manifest + ", which named memhost-plugin-journal", "memhost-plugin-other"},
	} {
		out, err := run(step.args...)
		if (err != nil) != step.fails || !strings.Contains(out, step.say) {
			t.Fatalf("plugins manifest %v: %v, want failure %v and %q in:\n%s", step.args, err, step.fails, step.say, out)
		}
		if got := names(); got != step.executable {
			t.Fatalf("after plugins manifest %v the manifest names %s, want %s", step.args, got, step.executable)
		}
	}
}

// TestThirdPartyPlugin proves the plugin-author path end to end: the
// example provider, built in its own Go module against the SDK, gets a
// manifest from `memhost plugins manifest` and serves a stock memhost.
func TestThirdPartyPlugin(t *testing.T) {
	t.Parallel()
	pluginDir := t.TempDir()
	bin := testbin.BuildIn(t, "examples/journal", "./cmd/memhost-plugin-journal")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(pluginDir, "memhost-plugin-journal")
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := testbin.Command(testbin.Build(t, "./cmd/memhost"), "plugins", "manifest", exe).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "journal.plugin.json") {
		t.Fatalf("plugins manifest: %v\n%s", err, out)
	}
	cfgPath, dataDir := writeConfigIn(t, pluginDir, `
provider "notes" {
  plugin = "journal"
  config = { file = "notes.jsonl" }
}
`)
	m, err := startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	ids := remember(t, m, map[string]any{"scope": "identity:dana", "kind": "gotcha", "title": "Flaky staging DNS", "body": "Staging DNS flaps on Mondays; retry once."})
	got := recall(t, m, "dana", "staging dns")
	if len(got.Hits) != 1 || got.Hits[0].Record.ID != ids[0] {
		t.Fatalf("recall through the third-party plugin = %+v", got)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "notes.jsonl")); err != nil {
		t.Fatalf("the plugin did not write under the data directory: %v", err)
	}
}
