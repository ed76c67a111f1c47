package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/testbin"
)

// readyAnswer is /readyz's body.
type readyAnswer struct {
	Status  string `json:"status"`
	Plugins []struct {
		Instance      string `json:"instance"`
		Name          string `json:"name"`
		State         string `json:"state"`
		Healthy       bool   `json:"healthy"`
		LastError     string `json:"last_error"`
		Address       string `json:"address"`
		StartFailures int    `json:"start_failures"`
	} `json:"plugins"`
}

// instance finds one instance in a /readyz answer ("" when absent).
func (r readyAnswer) instance(name string) (state, lastError string) {
	for _, p := range r.Plugins {
		if p.Instance == name {
			return p.State, p.LastError
		}
	}
	return "", ""
}

// unavailable tells the states of an instance that cannot start: backing
// off, or in the retry that ends the backoff.
func unavailable(state string) bool { return state == "backoff" || state == "restarting" }

// eventually polls cond until it holds, failing the test after a minute:
// a supervisor's retry comes after its backoff, whose length is the
// configuration's, not the test's to assert.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 60 s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

const availabilityToken = "avail-token-0123456789abcdef"

// damagedDeployment: a healthy sqlite provider for realm default and a
// provider of the plugin under test for realm broken, and a token for
// both (an application's, so realm records are stored, not proposed).
func damagedDeployment(plugin, config string) string {
	return fmt.Sprintf(`
provider "good" {
  plugin = "sqlite"
  config = { path = "good.db" }
}
provider "bad" {
  plugin = %q
  config = %s
}
realm "default" { provider = "good" }
realm "broken" { provider = "bad" }
token "app" {
  secret_env = "MEMHOST_TEST_TOKEN"
  realms     = ["default", "broken"]
  role       = "application"
}
supervisor {
  health_interval_ms = 200
  max_backoff_ms     = 500
}
`, plugin, config)
}

// TestDamagedStoreStaysLocal (a sqlite database, a bleve index): a
// provider whose store cannot open leaves its realm answering 503
// provider_unavailable with the reason, in the answer, in /readyz (for a
// token) and in the log, while the other realm serves; once the file is
// repaired the realm recovers without a restart of the host.
// --require-all keeps the fail-fast start.
func TestDamagedStoreStaysLocal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		plugin, config string
		file           string // under data_dir: the file damaged
		reason         string // what the refusal says
	}{
		{"sqlite", `{ path = "bad.db" }`, "bad.db", "not an SQLite database"},
		{"bleve", `{ dir = "badidx" }`, filepath.Join("badidx", "broken.bleve", "index_meta.json"), "corrupt or not a bleve index"},
	} {
		t.Run(tc.plugin, func(t *testing.T) {
			t.Parallel()
			damagedStore(t, damagedDeployment(tc.plugin, tc.config), tc.file, tc.reason)
		})
	}
}

func damagedStore(t *testing.T, deployment, file, reason string) {
	cfgPath, dataDir := writeConfig(t, deployment)
	env := []string{"MEMHOST_TEST_TOKEN=" + availabilityToken}
	start := func(args ...string) (*instance, error) {
		m, err := startServe(t, dataDir, append([]string{"--config", cfgPath}, args...), env)
		if m != nil {
			m.token = availabilityToken
		}
		return m, err
	}
	m, err := start()
	if err != nil {
		t.Fatal(err)
	}
	record := map[string]any{"scope": "realm", "kind": "fact", "title": "Harbour crane", "body": "The harbour crane is inspected on Mondays."}
	var stored struct {
		IDs []string `json:"ids"`
	}
	if code := m.do("POST", "/v1/records", map[string]any{"realm": "broken", "records": []any{record}}, &stored); code != 200 || len(stored.IDs) != 1 {
		t.Fatalf("seeding realm broken = %d\n%s", code, m.logs())
	}
	m.stop()

	bad := filepath.Join(dataDir, file)
	if err := os.Rename(bad, bad+".good"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(strings.Repeat("this is not what the store wrote\n", 400)), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("require-all fails the start with the reason", func(t *testing.T) {
		m, err := start("--require-all")
		if err == nil {
			m.stop()
			t.Fatal("serve --require-all started with a damaged store")
		}
		if !strings.Contains(err.Error(), `provider "bad"`) || !strings.Contains(err.Error(), reason) {
			t.Fatalf("the refusal does not name the instance and the reason:\n%v", err)
		}
	})
	m, err = start()
	if err != nil {
		t.Fatalf("serve did not start beside a damaged store: %v", err)
	}
	// The healthy realm serves, writes and reads.
	ids := remember(t, m, map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Espresso", "body": "Alice takes espresso."})
	if got := recall(t, m, "alice", "espresso"); len(got.Hits) != 1 || got.Hits[0].Record.ID != ids[0] {
		t.Fatalf("healthy realm recall = %+v", got)
	}
	// The damaged one answers 503 with the typed code and the reason,
	// reads and writes alike (a write is not "unsupported").
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/recall", map[string]any{"identity": map[string]string{"realm": "broken", "id": "alice"}, "query": "crane"}},
		{"/v1/records", map[string]any{"realm": "broken", "records": []any{record}}},
	} {
		var e apiError
		var retryAfter string
		code := m.doWith("POST", c.path, c.body, &e, func(r *http.Response) { retryAfter = r.Header.Get("Retry-After") })
		if code != http.StatusServiceUnavailable || e.Error.Code != "provider_unavailable" || !strings.Contains(e.Error.Message, reason) || retryAfter == "" {
			t.Errorf("POST %s in the damaged realm = %d %+v (Retry-After %q), want 503 provider_unavailable with the reason", c.path, code, e, retryAfter)
		}
	}
	// /readyz: only the status without a token; which instance and why
	// with one.
	var anon readyAnswer
	tok := m.token
	m.token = ""
	if code := m.do("GET", "/readyz", nil, &anon); code != http.StatusServiceUnavailable || anon.Status != "not ready" || len(anon.Plugins) != 0 {
		t.Errorf("anonymous /readyz = %d %+v, want 503 without details", code, anon)
	}
	m.token = tok
	var ready readyAnswer
	if code := m.do("GET", "/readyz", nil, &ready); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d, want 503", code)
	}
	if state, _ := ready.instance("good"); state != "ready" {
		t.Errorf("/readyz: good is %q, want ready: %+v", state, ready)
	}
	if state, last := ready.instance("bad"); !unavailable(state) || !strings.Contains(last, reason) {
		t.Errorf("/readyz: bad is %q (%q), want it backing off with the reason", state, last)
	}
	if logs := m.logs(); !strings.Contains(logs, "plugin failed to start") || !strings.Contains(logs, reason) {
		t.Errorf("the log does not say the instance failed to start and why:\n%s", logs)
	}

	// Repaired: the supervisor's retry opens it, and the realm serves the
	// record written before the damage, the host never restarted.
	if err := os.Rename(bad+".good", bad); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the realm recovering after the repair", func() bool {
		var r readyAnswer
		return m.do("GET", "/readyz", nil, &r) == http.StatusOK
	})
	var got recallAnswer
	if code := m.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"realm": "broken", "id": "alice"}, "query": "harbour crane"}, &got); code != 200 || len(got.Hits) != 1 || got.Hits[0].Record.ID != stored.IDs[0] {
		t.Fatalf("recall in the repaired realm = %d %+v, want %s", code, got, stored.IDs[0])
	}
	if m.cmd.ProcessState != nil {
		t.Fatal("the host exited")
	}
}

// certPair makes a self-signed P-256 certificate and key for name in dir
// with the OpenSSL command docs/deployment.md gives (san, when set, is
// its subjectAltName); a self-signed certificate named as the peer's CA
// pins it.
func certPair(t *testing.T, dir, name, san string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	args := []string{"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "825",
		"-subj", "/CN=" + name, "-addext", "basicConstraints=critical,CA:TRUE", "-keyout", keyFile, "-out", certFile}
	if san != "" {
		args = append(args, "-addext", "subjectAltName="+san)
	}
	if out, err := exec.Command("openssl", args...).CombinedOutput(); err != nil {
		t.Fatalf("openssl %v: %v\n%s", args, err, out)
	}
	return certFile, keyFile
}

// remotePlugin is a `memhost-plugin-sqlite serve --listen` process.
type remotePlugin struct {
	cmd  *exec.Cmd
	logs *strings.Builder
}

// startRemote starts the sqlite plugin as a remote server with args and
// waits until it says it serves.
func startRemote(t *testing.T, args ...string) *remotePlugin {
	t.Helper()
	cmd := testbin.Command(testbin.Build(t, "./plugins/sqlite/cmd/memhost-plugin-sqlite"), append([]string{"serve"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &remotePlugin{cmd: cmd, logs: new(strings.Builder)}
	t.Cleanup(func() { r.kill() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		r.logs.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), `"@message":"serving"`) {
			go func() {
				for sc.Scan() {
				}
			}()
			return r
		}
	}
	cmd.Wait()
	t.Fatalf("the remote plugin exited before serving:\n%s", r.logs)
	return nil
}

func (r *remotePlugin) kill() {
	if r.cmd.ProcessState == nil {
		r.cmd.Process.Signal(syscall.SIGKILL)
		r.cmd.Wait()
	}
}

// freeAddr answers a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestRemotePluginSharedByTwoHosts: one sqlite provider served with
// --listen and mutual TLS (pinned self-signed certificates), two memhost
// hosts dialling it. A write on one is recalled on the other; killing the
// plugin makes both hosts' realm 503 and /readyz say so; restarting it on
// the same port brings both back without restarting them; a host with a
// certificate the plugin does not trust is refused.
func TestRemotePluginSharedByTwoHosts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serverCert, serverKey := certPair(t, dir, "plugin", "IP:127.0.0.1")
	hostCert, hostKey := certPair(t, dir, "host", "")
	strangerCert, strangerKey := certPair(t, dir, "stranger", "")
	cfgJSON := filepath.Join(dir, "sqlite.json")
	if err := os.WriteFile(cfgJSON, []byte(fmt.Sprintf(`{"path": %q}`, filepath.Join(dir, "shared.db"))), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	serveArgs := []string{"--listen", addr, "--config", cfgJSON, "--tls-cert", serverCert, "--tls-key", serverKey, "--tls-client-ca", hostCert}
	remote := startRemote(t, serveArgs...)

	deployment := func(cert, key string) string {
		return fmt.Sprintf(`
provider "shared" {
  address  = %q
  tls_cert = %q
  tls_key  = %q
  tls_ca   = %q
}
realm "default" { provider = "shared" }
supervisor {
  health_interval_ms = 200
  max_backoff_ms     = 500
}
`, addr, cert, key, serverCert)
	}
	var hosts []*instance
	for range 2 {
		m, err := tryStartMemhost(t, deployment(hostCert, hostKey))
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, m)
	}
	ids := remember(t, hosts[0], map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Shared", "body": "Written on host one, read on host two."})
	if got := recall(t, hosts[1], "alice", "host one"); len(got.Hits) != 1 || got.Hits[0].Record.ID != ids[0] {
		t.Fatalf("host two recalled %+v, want host one's record %s", got, ids[0])
	}
	var ready readyAnswer
	if code := hosts[0].do("GET", "/v1/plugins", nil, &ready); code != 200 || len(ready.Plugins) == 0 || ready.Plugins[0].Address != addr || ready.Plugins[0].Name != "sqlite" {
		t.Errorf("/v1/plugins = %d %+v, want the remote sqlite at %s", code, ready, addr)
	}

	remote.kill()
	for i, m := range hosts {
		eventually(t, fmt.Sprintf("host %d noticing the remote plugin is gone", i+1), func() bool {
			var r readyAnswer
			code := m.do("GET", "/readyz", nil, &r)
			state, last := r.instance("shared")
			return code == http.StatusServiceUnavailable && state != "ready" && last != ""
		})
		var e apiError
		if code := m.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"id": "alice"}, "query": "host one"}, &e); code != http.StatusServiceUnavailable || e.Error.Code != "provider_unavailable" {
			t.Errorf("host %d recall with the remote plugin down = %d %+v, want 503 provider_unavailable", i+1, code, e)
		}
	}

	remote = startRemote(t, serveArgs...)
	for i, m := range hosts {
		eventually(t, fmt.Sprintf("host %d reconnecting", i+1), func() bool {
			var r readyAnswer
			return m.do("GET", "/readyz", nil, &r) == http.StatusOK
		})
		if got := recall(t, m, "alice", "host one"); len(got.Hits) != 1 || got.Hits[0].Record.ID != ids[0] {
			t.Errorf("host %d after the reconnect recalled %+v", i+1, got)
		}
		if m.cmd.ProcessState != nil {
			t.Errorf("host %d exited", i+1)
		}
	}
	// A host that stops closes its connection only: the plugin and the
	// other host go on.
	hosts[0].stop()
	if got := recall(t, hosts[1], "alice", "host one"); len(got.Hits) != 1 {
		t.Errorf("host two after host one stopped recalled %+v", got)
	}
	if err := remote.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the remote plugin is gone after a host stopped: %v", err)
	}

	t.Run("a host whose certificate the plugin does not trust is refused", func(t *testing.T) {
		m, err := tryStartMemhost(t, deployment(strangerCert, strangerKey))
		if err != nil {
			t.Fatal(err)
		}
		var r readyAnswer
		if code := m.do("GET", "/readyz", nil, &r); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz of the stranger = %d, want 503", code)
		}
		if state, last := r.instance("shared"); !unavailable(state) || !strings.Contains(last, "client certificate") {
			t.Errorf("the stranger's instance is %q (%q), want backoff for its certificate", state, last)
		}
		var e apiError
		if code := m.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"id": "alice"}, "query": "host one"}, &e); code != http.StatusServiceUnavailable {
			t.Errorf("the stranger recalled: %d %+v", code, e)
		}
	})
	t.Run("a remote plugin that does not serve the kind is refused", func(t *testing.T) {
		m, err := tryStartMemhost(t, fmt.Sprintf(`
selector "remote" {
  address  = %q
  tls_cert = %q
  tls_key  = %q
  tls_ca   = %q
}
`, addr, hostCert, hostKey, serverCert))
		if err != nil {
			t.Fatal(err)
		}
		var r readyAnswer
		if code := m.do("GET", "/readyz", nil, &r); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz = %d, want 503", code)
		}
		if state, last := r.instance("remote"); !unavailable(state) || !strings.Contains(last, `does not serve kind "selector"`) {
			t.Errorf("a provider dialled as a selector is %q (%q), want refused for its kind", state, last)
		}
	})
	t.Run("a plaintext listen off loopback is refused", func(t *testing.T) {
		out, err := testbin.Command(testbin.Build(t, "./plugins/sqlite/cmd/memhost-plugin-sqlite"), "serve", "--listen", "0.0.0.0:0", "--config", cfgJSON).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "refusing to serve without TLS") {
			t.Fatalf("serve --listen 0.0.0.0:0 without TLS: %v\n%s", err, out)
		}
	})
}
