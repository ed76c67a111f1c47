package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/httpapi"
	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
)

// mcpServer is one server entry of an MCP client configuration.
type mcpServer struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

var (
	fenceRE     = regexp.MustCompile("(?s)```(json|sh)\n(.*?)```")
	headerArgRE = regexp.MustCompile(`--header "([^"]+)"`)
)

// TestMCPDocConfigs holds every client configuration in docs/mcp.md to
// the real command: each JSON block parses, each stdio entry runs
// `memhost mcp` with flags the command has, each HTTP entry points at /mcp
// with the headers the server reads.
func TestMCPDocConfigs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testbin.ModuleRoot(t), "docs", "mcp.md"))
	if err != nil {
		t.Fatal(err)
	}
	var stdio, remote int
	for _, m := range fenceRE.FindAllStringSubmatch(string(data), -1) {
		lang, body := m[1], m[2]
		if lang == "sh" {
			for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
				if !strings.HasPrefix(line, "claude mcp add ") {
					t.Errorf("unexpected shell line %q", line)
					continue
				}
				if before, after, ok := strings.Cut(line, " -- "); ok {
					cmd := strings.Fields(after)
					if len(cmd) < 2 || cmd[0] != "memhost" || cmd[1] != "mcp" {
						t.Errorf("%q: runs %v, not memhost mcp", line, cmd)
						continue
					}
					checkStdioArgs(t, before, cmd[2:])
					stdio++
					continue
				}
				fields := strings.Fields(line)
				i := slices.IndexFunc(fields, func(f string) bool { return strings.HasPrefix(f, "http") && strings.Contains(f, "://") })
				if i < 0 {
					t.Errorf("%q: no URL", line)
					continue
				}
				headers := map[string]string{}
				for _, h := range headerArgRE.FindAllStringSubmatch(line, -1) {
					k, v, _ := strings.Cut(h[1], ": ")
					headers[k] = v
				}
				checkHTTPEntry(t, line, mcpServer{URL: fields[i], Headers: headers})
				remote++
			}
			continue
		}
		var doc struct {
			MCPServers map[string]mcpServer `json:"mcpServers"`
			Servers    map[string]mcpServer `json:"servers"`
			Inputs     []map[string]any     `json:"inputs"`
		}
		dec := json.NewDecoder(strings.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			t.Errorf("a JSON block does not parse: %v\n%s", err, body)
			continue
		}
		servers := doc.MCPServers
		if servers == nil {
			servers = doc.Servers
		}
		if _, ok := servers["memhost"]; len(servers) != 1 || !ok {
			t.Errorf("want one server named memhost:\n%s", body)
		}
		for name, s := range servers {
			switch {
			case s.Command != "":
				if s.Command != "memhost" || len(s.Args) == 0 || s.Args[0] != "mcp" {
					t.Errorf("%s: runs %s %v, not memhost mcp", name, s.Command, s.Args)
					continue
				}
				if s.Type != "" && s.Type != "stdio" {
					t.Errorf("%s: type %q with a command", name, s.Type)
				}
				for k := range s.Env {
					if k != TokenEnv {
						t.Errorf("%s: environment %s, memhost mcp reads only %s", name, k, TokenEnv)
					}
				}
				if slices.Contains(s.Args, "--addr") && s.Env[TokenEnv] == "" {
					t.Errorf("%s: --addr without %s", name, TokenEnv)
				}
				checkStdioArgs(t, name, s.Args[1:])
				stdio++
			case s.URL != "":
				if s.Type != "" && s.Type != "http" {
					t.Errorf("%s: type %q with a URL", name, s.Type)
				}
				checkHTTPEntry(t, name, s)
				remote++
			default:
				t.Errorf("%s: neither a command nor a URL", name)
			}
		}
	}
	if stdio < 5 || remote < 3 {
		t.Fatalf("docs/mcp.md has %d stdio and %d HTTP configurations; want the common clients' both ways", stdio, remote)
	}
}

// checkStdioArgs parses args with the real `memhost mcp` flags.
func checkStdioArgs(t *testing.T, where string, args []string) {
	t.Helper()
	cmd := mcpCommand()
	if err := cmd.ParseFlags(args); err != nil {
		t.Errorf("%s: memhost mcp %v: %v", where, args, err)
		return
	}
	if rest := cmd.Flags().Args(); len(rest) > 0 {
		t.Errorf("%s: memhost mcp takes no arguments, got %v", where, rest)
	}
	if !cmd.Flags().Changed("identity") && !cmd.Flags().Changed("addr") {
		t.Errorf("%s: memhost mcp %v names no --identity", where, args)
	}
}

// checkHTTPEntry: the URL is a server's /mcp and the headers are the
// bearer token and the identity headers the server reads.
func checkHTTPEntry(t *testing.T, where string, s mcpServer) {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil || u.Path != "/mcp" {
		t.Errorf("%s: URL %q is not a server's /mcp", where, s.URL)
	}
	if _, ok := s.Headers[httpapi.HeaderIdentity]; !ok {
		t.Errorf("%s: no %s header", where, httpapi.HeaderIdentity)
	}
	for k, v := range s.Headers {
		switch http.CanonicalHeaderKey(k) {
		case "Authorization":
			if !strings.HasPrefix(v, "Bearer ") {
				t.Errorf("%s: Authorization %q is no bearer token", where, v)
			}
		case httpapi.HeaderIdentity, httpapi.HeaderRealm:
		default:
			t.Errorf("%s: header %s is none the server reads", where, k)
		}
	}
}

// TestDocIDsHaveTheRealShape: every record id the README and the API
// document show is shaped as memhost makes them.
func TestDocIDsHaveTheRealShape(t *testing.T) {
	if id := sdk.NewRecordID(time.Now()); !recordIDRE.MatchString(id) {
		t.Fatalf("a new id %s does not have the shape the docs are held to", id)
	}
	for _, doc := range []string{"README.md", "docs/api.md", "docs/mcp.md"} {
		data, err := os.ReadFile(filepath.Join(testbin.ModuleRoot(t), doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range docIDRE.FindAllString(string(data), -1) {
			if !recordIDRE.MatchString(id) {
				t.Errorf("%s shows the id %s, not shaped as memhost makes them", doc, id)
			}
		}
	}
}

func TestMCPEndpoint(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1:7077":               "http://127.0.0.1:7077/mcp",
		"http://127.0.0.1:7077/":       "http://127.0.0.1:7077/mcp",
		"https://memhost.internal/mcp": "https://memhost.internal/mcp",
		"http://h:1/prefix/mcp/":       "http://h:1/prefix/mcp",
	} {
		if got := mcpEndpoint(addr); got != want {
			t.Errorf("mcpEndpoint(%q) = %q, want %q", addr, got, want)
		}
	}
}
