package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/config"
	"github.com/memhost/memhost/internal/httpapi"
	"github.com/memhost/memhost/internal/mcpserver"
	"github.com/memhost/memhost/internal/proposal"
	"github.com/memhost/memhost/internal/statedb"
	"github.com/memhost/memhost/sdk"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

func mcpCommand() *cobra.Command {
	var cf configFlag
	var o serveOverrides
	var identity, realm, addr string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve memory to one agent as an MCP server on standard input and output",
		Long: `Serve the MCP memory tools (memory_remember, memory_recall, memory_forget,
memory_index) on standard input and output for one identity. Point a desktop
or IDE agent's MCP configuration at this command (docs/mcp.md has them
ready to paste). Logs go to standard error; standard output carries only
the protocol.

By default it starts the configured plugins in this process. Without
--config its data lives in the user's data directory ($XDG_DATA_HOME/memhost,
else ~/.local/share/memhost), whatever directory the agent starts it in.

With --addr it starts no plugin: it serves the tools of a running
` + "`memhost serve`" + ` (its /mcp endpoint), with the token in ` + TokenEnv + `. Use it when a
server already holds the data directory.`,
		Example: `  memhost mcp --identity alice
  memhost mcp --config memhost.hcl --identity alice --realm team
  MEMHOST_TOKEN=... memhost mcp --addr http://127.0.0.1:7077 --identity alice`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), stopSignals...)
			defer stop()
			if addr != "" {
				if cmd.Flags().Changed("data-dir") || cmd.Flags().Changed("plugin-dir") || cf.path != "" {
					return errors.New("--addr serves a running memhost's tools: --config, --data-dir and --plugin-dir belong to that server")
				}
				if err := checkPort(addr); err != nil {
					return err
				}
				token, err := clientToken()
				if err != nil {
					return err
				}
				return stopped(ctx, proxyMCP(ctx, addr, token, identity, realm))
			}
			if identity == "" {
				return errors.New("--identity is required: the tools act for one identity")
			}
			cfg, err := cf.load(func(cfg *config.Config) error {
				if cf.path == "" && o.dataDir == "" {
					dir, err := userDataDir()
					if err != nil {
						return err
					}
					cfg.DataDir = dir
				}
				return o.set(cfg)
			})
			if err != nil {
				return err
			}
			if realm == "" {
				realm = cfg.DefaultRealm
			}
			id := sdk.Identity{Realm: realm, ID: identity}
			if err := id.Validate(); err != nil {
				// Named by the flag that gave it ("identity.id: ..."
				// named a field the caller never typed).
				var fe *sdk.FieldError
				if errors.As(err, &fe) && fe.Field == "identity.id" {
					return fmt.Errorf("--identity %s", fe.Problem)
				}
				if errors.As(err, &fe) && fe.Field == "realm" {
					return fmt.Errorf("--realm %s", fe.Problem)
				}
				return err
			}
			token, err := checkTokenIdentity(cfg, id)
			if err != nil {
				return err
			}
			// Its first tool call needs the plugins up: every first start
			// is waited for, not serve's boot wait.
			cfg.Supervisor.BootWait = 0
			h, err := startHost(ctx, cfg, newLogger(cfg))
			if errors.Is(err, statedb.ErrInUse) {
				return fmt.Errorf("%w: serve its tools with `memhost mcp --addr http://%s --identity %s` (token in %s), or give this one its own --data-dir",
					err, servedAddr(cfg.DataDir, cfg.Listen), identity, TokenEnv)
			}
			if err != nil {
				return stopped(ctx, err)
			}
			defer h.close()
			return stopped(ctx, serveMCP(ctx, h, cfg, mcpserver.Caller{Identity: id, Token: token}))
		},
	}
	cf.register(cmd)
	o.registerDataDir(cmd, "directory for plugin data and the host's state (default: the config's, or the user's data directory without --config)")
	o.registerPluginDir(cmd)
	cmd.Flags().StringVar(&identity, "identity", "", "the identity the tools act for (required unless --addr's token carries one)")
	cmd.Flags().StringVar(&realm, "realm", "", "the identity's realm (default: the configured default realm)")
	cmd.Flags().StringVar(&addr, "addr", "", "URL of a running memhost to serve the tools of, instead of starting plugins here (token in "+TokenEnv+")")
	return cmd
}

// stopped is err, or nil when it is the end of ctx by a stop signal: a
// stop asked for is no failure.
func stopped(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// userDataDir is where `memhost mcp` keeps its data without a config: an
// MCP client starts it in any directory (often /), so the working
// directory is no place for it.
func userDataDir() (string, error) {
	if dir := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "memhost"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no data directory: set XDG_DATA_HOME, HOME or --data-dir: %w", err)
	}
	return filepath.Join(home, ".local", "share", "memhost"), nil
}

// serveMCP serves the tools on stdio for one fixed caller: an identity
// and the token its proposals count against.
func serveMCP(ctx context.Context, h *host, cfg *config.Config, caller mcpserver.Caller) error {
	return mcpserver.ServeStdio(ctx, mcpserver.Options{
		Version:            version,
		Provider:           h.provider,
		Coordinator:        h.coordinator,
		Bind:               func(http.Header) (mcpserver.Caller, error) { return caller, nil },
		Proposals:          h.proposalQueue(cfg),
		ProposalRetryAfter: cfg.Proposals.RetryAfter,
		Logger:             h.logger.Named("mcp"),
		Traces:             h.traces,
	})
}

// proposalQueue is the host's proposal queue: every surface an agent
// proposes through (/v1, /mcp, stdio) counts against one bound.
func (h *host) proposalQueue(cfg *config.Config) *proposal.Queue {
	return &proposal.Queue{Ledger: h.stores.proposals, MaxPending: cfg.Proposals.MaxPending}
}

// mcpSetupDeadline bounds the proxy's connection to the server and its
// listing of the tools.
var mcpSetupDeadline = time.Minute

// proxyMCP serves on stdio the tools of the server at addr, calling its
// /mcp endpoint with the token and identity headers for every request.
func proxyMCP(ctx context.Context, addr, token, identity, realm string) error {
	header := http.Header{}
	if token != "" {
		header.Set("Authorization", "Bearer "+token)
	}
	if identity != "" {
		header.Set(httpapi.HeaderIdentity, identity)
	}
	if realm != "" {
		header.Set(httpapi.HeaderRealm, realm)
	}
	endpoint := mcpEndpoint(addr)
	transport := &headerTransport{header: header, next: http.DefaultTransport}
	client := mcp.NewClient(&mcp.Implementation{Name: "memhost-mcp", Version: version}, nil)
	// Connecting and listing the tools, and each call after, have a
	// deadline: a server that accepts and never answers fails the proxy
	// (or the call) instead of holding the agent's client for good.
	setup, cancel := withDeadline(ctx, mcpSetupDeadline)
	defer cancel()
	remote, err := client.Connect(setup, &mcp.StreamableClientTransport{
		Endpoint:             endpoint,
		HTTPClient:           &http.Client{Transport: transport},
		MaxRetries:           -1,
		DisableStandaloneSSE: true, // the server's /mcp is stateless: it never pushes
	}, nil)
	if err != nil && errors.Is(context.Cause(setup), errNoAnswer) {
		return fmt.Errorf("memhost at %s: %w", endpoint, context.Cause(setup))
	}
	if refusal := transport.refused.Load(); err != nil && refusal != nil {
		// The server's own refusal (a token, a realm), said as the
		// other commands say it, not as the MCP client's "calling
		// "initialize": sending "initialize": Forbidden".
		return refusal
	}
	if err != nil {
		hint := connectHint(err, "no --addr to start the plugins in this process")
		var op *net.OpError
		if errors.As(err, &op) {
			// Said once and plainly, as the other commands say it.
			return fmt.Errorf("%w%s", &transportError{base: addr, err: err}, hint)
		}
		return fmt.Errorf("memhost at %s: %w%s", endpoint, err, hint)
	}
	defer remote.Close()
	local := mcp.NewServer(&mcp.Implementation{Name: "memhost", Version: version}, nil)
	call := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return forward(ctx, endpoint, func(ctx context.Context) (*mcp.CallToolResult, error) {
			return remote.CallTool(ctx, &mcp.CallToolParams{Name: req.Params.Name, Arguments: req.Params.Arguments})
		})
	}
	for tool, err := range remote.Tools(setup, nil) {
		if err != nil {
			return fmt.Errorf("memhost at %s: listing tools: %w", endpoint, err)
		}
		if !objectSchema(tool.InputSchema) {
			return fmt.Errorf("memhost at %s: tool %q has no object input schema", endpoint, tool.Name)
		}
		local.AddTool(tool, call)
	}
	// A tool call, prompt or resource the proxy does not know is the
	// server's to refuse too: the SDK's own refusal quotes the name (or
	// uri) as sent, and the proxy has no renderer for text a model reads;
	// the server renders it.
	local.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch req := req.(type) {
			case *mcp.CallToolRequest:
				return call(ctx, req)
			case *mcp.GetPromptRequest:
				return forward(ctx, endpoint, func(ctx context.Context) (*mcp.GetPromptResult, error) { return remote.GetPrompt(ctx, req.Params) })
			case *mcp.ReadResourceRequest:
				return forward(ctx, endpoint, func(ctx context.Context) (*mcp.ReadResourceResult, error) {
					return remote.ReadResource(ctx, req.Params)
				})
			}
			return next(ctx, method, req)
		}
	})
	// The SDK refuses an unknown method or unreadable params itself,
	// quoting them as sent; the proxy renders those refusals by the
	// server's rules (its instruction header, which the defaults' would
	// leave a forged marker of live), as its initialize answer told them.
	renderer, err := coordinator.New(mcpserver.RenderConfig(renderRules(setup, endpoint, transport)), coordinator.Options{Providers: coordinator.RealmProviders{}})
	if err != nil {
		return err
	}
	defer renderer.Close(context.WithoutCancel(ctx))
	return local.Run(ctx, mcpserver.StdioTransport(renderer))
}

// renderRules answers the _meta of the server's answer to an initialize
// request, which names how it renders text for a model (see
// mcpserver.RenderConfig). The MCP client does not keep it: it may not
// initialize at all (a newer protocol discovers the server instead). Nil
// when the server does not answer it so (an older memhost).
func renderRules(ctx context.Context, endpoint string, transport http.RoundTripper) mcp.Meta {
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"memhost-mcp","version":"1"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		return nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var answer struct {
		Result struct {
			Meta mcp.Meta `json:"_meta"`
		} `json:"result"`
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
		json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&answer) != nil {
		return nil
	}
	return answer.Result.Meta
}

// forward passes one request on to the server within requestDeadline,
// answering what it answers (proxied).
func forward[R any](ctx context.Context, endpoint string, send func(context.Context) (R, error)) (R, error) {
	ctx, cancel := withDeadline(ctx, requestDeadline)
	defer cancel()
	res, err := send(ctx)
	return res, proxied(ctx, endpoint, err)
}

// proxied is the error of a request the proxy passed on: the server's own
// refusal as it answered it (its code, and its message once), or the
// deadline that passed.
func proxied(ctx context.Context, endpoint string, err error) error {
	var wire *jsonrpc.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(context.Cause(ctx), errNoAnswer):
		return fmt.Errorf("memhost at %s: %w", endpoint, context.Cause(ctx))
	case errors.As(err, &wire):
		return wire
	}
	return err
}

// mcpEndpoint is the /mcp URL of a server given as host:port or URL.
func mcpEndpoint(addr string) string {
	base := baseURL(addr)
	if strings.HasSuffix(base, "/mcp") {
		return base
	}
	return base + "/mcp"
}

// objectSchema: AddTool takes only an input schema of type object (it
// panics otherwise), so the proxy checks what the server sent.
func objectSchema(s any) bool {
	m, ok := s.(map[string]any)
	return ok && m["type"] == "object"
}

// headerTransport adds fixed headers to every request, and notes the
// first memhost error answer (401, 403, ...): the MCP client's error
// carries neither its code nor its message.
type headerTransport struct {
	header  http.Header
	next    http.RoundTripper
	refused atomic.Pointer[callError]
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.header {
		r.Header[k] = v
	}
	resp, err := h.next.RoundTrip(r)
	if err == nil && resp.StatusCode >= 400 {
		// An error answer is small; the client reads it again after.
		data, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(data))
		var ce *callError
		if rerr == nil && errors.As((&apiClient{base: baseURL(r.URL.Host)}).answerError(resp.StatusCode, data), &ce) && ce.foreign == "" {
			h.refused.CompareAndSwap(nil, ce)
			if answer := callRefusal(r, ce); answer != nil {
				resp.Body.Close()
				resp.StatusCode, resp.Status = http.StatusOK, "200 OK"
				resp.Header = http.Header{"Content-Type": {"application/json"}}
				resp.ContentLength = int64(len(answer))
				resp.Body = io.NopCloser(bytes.NewReader(answer))
			}
		}
	}
	return resp, err
}

// callRefusal answers the server's refusal ce of the call r carried (a
// body with a repeated name, one over max_body_bytes, a token over its
// max_in_flight) as the JSON-RPC error of that call; nil when r carried
// no call. The MCP client takes any other 4xx answer for a broken
// connection and fails every call after it: one careless call cost the
// agent its memory tools until it restarted the proxy.
func callRefusal(r *http.Request, ce *callError) []byte {
	if r.Method != http.MethodPost || r.GetBody == nil {
		return nil
	}
	body, err := r.GetBody()
	if err != nil {
		return nil
	}
	defer body.Close()
	sent, err := io.ReadAll(body)
	if err != nil {
		return nil
	}
	msg, err := jsonrpc.DecodeMessage(sent)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok || !req.IsCall() {
		return nil
	}
	code := int64(jsonrpc.CodeInternalError)
	if ce.Status < http.StatusInternalServerError {
		code = jsonrpc.CodeInvalidRequest
	}
	if ce.Status == http.StatusBadRequest || ce.Status == http.StatusRequestEntityTooLarge {
		code = jsonrpc.CodeInvalidParams
	}
	answer, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: code, Message: ce.Error()}})
	if err != nil {
		return nil
	}
	return answer
}
