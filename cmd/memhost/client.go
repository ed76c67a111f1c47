package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/memhost/memhost/internal/config"
	"github.com/memhost/memhost/internal/statedb"
	"github.com/spf13/cobra"
)

// TokenEnv names the environment variable the one-shot commands read the
// bearer token from (never a flag: flags show in process listings).
const TokenEnv = "MEMHOST_TOKEN"

// clientFlags are shared by every one-shot command: where the API is, or
// --local to start the configured plugins in this process instead.
type clientFlags struct {
	cf    configFlag
	addr  string
	local bool
}

func (f *clientFlags) register(cmd *cobra.Command) {
	f.cf.register(cmd)
	cmd.Flags().StringVar(&f.addr, "addr", "", "address of a running memhost (default: the one the memhost serving the configured data directory noted, else the configured listen address); its token in "+TokenEnv)
	cmd.Flags().BoolVar(&f.local, "local", false, "start the configured plugins in this process instead of calling a server")
	// --local would silently ignore --addr: the operator meant one of
	// them. Checked before the command reads a file or starts plugins.
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if f.local && f.addr != "" {
			return errors.New("--addr and --local exclude each other: --addr calls a running memhost, --local starts the plugins in this process")
		}
		return nil
	}
}

// apiClient calls the HTTP API, over the network or in process.
type apiClient struct {
	base   string
	token  string
	http   *http.Client
	closer func()
}

// run answers fn's error, fn called with a client for f under the
// command's one-minute deadline; the client is closed after.
func (f *clientFlags) run(cmd *cobra.Command, fn func(ctx context.Context, c *apiClient) error) error {
	ctx, cancel := commandContext(cmd, time.Minute)
	defer cancel()
	c, err := f.client(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	return fn(ctx, c)
}

// runInterruptible calls fn with a client as run does, but with no
// deadline on the whole: for a command whose work is long or streams
// (each request keeps its own deadline), which an interrupt ends instead.
func (f *clientFlags) runInterruptible(cmd *cobra.Command, fn func(ctx context.Context, c *apiClient) error) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), stopSignals...)
	defer stop()
	c, err := f.client(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	return fn(ctx, c)
}

// client connects as the flags say. The caller must call close.
func (f *clientFlags) client(ctx context.Context) (*apiClient, error) {
	token, err := clientToken()
	if err != nil {
		return nil, err
	}
	c := &apiClient{token: token, closer: func() {}}
	if !f.local {
		addr := f.addr
		if addr == "" {
			cfg, err := f.cf.loadForClient(nil)
			if err != nil {
				return nil, err
			}
			// A serve started with --listen (or another config) notes
			// where it answers in the data directory it holds. Only while
			// it holds it: a killed serve's note may name a port another
			// process took since, which would be sent the token.
			addr = cfg.Listen
			if statedb.Held(cfg.DataDir) {
				addr = servedAddr(cfg.DataDir, cfg.Listen)
			}
		}
		if err := checkAddr(addr); err != nil {
			return nil, err
		}
		c.base = baseURL(addr)
		c.http = &http.Client{}
		return c, nil
	}
	cfg, err := f.cf.load(nil)
	if err != nil {
		return nil, err
	}
	// In process: the same API, served by the handler without a socket,
	// so --local and a server answer exactly alike. Only warnings are
	// logged: the command's output is its answer.
	cfg.LogLevel = "warn"
	// A one-shot command needs its plugins up: it waits for every first
	// start rather than serve without a slow one.
	cfg.Supervisor.BootWait = 0
	h, err := startHost(ctx, cfg, newLogger(cfg).Named("local"))
	var inUse *dataDirInUse
	if errors.As(err, &inUse) && inUse.addr != "" {
		return nil, fmt.Errorf("%w: call it instead of --local (--addr %s), or stop it first", err, inUse.addr)
	}
	if errors.As(err, &inUse) {
		return nil, fmt.Errorf("%w: let it finish, or stop it first", err)
	}
	if err != nil {
		return nil, err
	}
	c.base = "http://local"
	c.http = &http.Client{Transport: handlerTransport{h.server.Handler()}}
	c.closer = h.close
	return c, nil
}

func (c *apiClient) close() { c.closer() }

// handlerTransport answers requests with an in-process handler. The body
// streams through a pipe as the handler writes it, so a streamed answer
// (reindex progress) arrives line by line with --local too.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	rw := &pipeResponse{header: http.Header{}, body: pw, started: make(chan struct{})}
	go func() {
		t.h.ServeHTTP(rw, r)
		rw.WriteHeader(http.StatusOK) // a handler that wrote nothing
		pw.Close()
	}()
	select {
	case <-rw.started:
	case <-r.Context().Done():
		// The handler sees the same context and winds down on its own.
		pr.CloseWithError(r.Context().Err())
		return nil, r.Context().Err()
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", rw.status, http.StatusText(rw.status)), StatusCode: rw.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rw.sent, Body: pr, ContentLength: -1, Request: r,
	}, nil
}

// pipeResponse is the handler's side of handlerTransport.
type pipeResponse struct {
	header  http.Header
	sent    http.Header // the header as of WriteHeader
	body    *io.PipeWriter
	status  int
	once    sync.Once
	started chan struct{}
}

func (p *pipeResponse) Header() http.Header { return p.header }

func (p *pipeResponse) WriteHeader(status int) {
	p.once.Do(func() {
		p.status, p.sent = status, p.header.Clone()
		close(p.started)
	})
}

func (p *pipeResponse) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return p.body.Write(b)
}

// Flush is a no-op: every write already reaches the reader.
func (p *pipeResponse) Flush() {}

// callError is an error answer of the API, shown as "code: message", or
// as foreign when the answer was not memhost's.
type callError struct {
	Status  int
	Code    string
	Message string
	foreign string
}

func (e *callError) Error() string {
	if e.foreign != "" {
		return e.foreign
	}
	return e.Code + ": " + e.Message
}

// call sends body (JSON-encoded unless it is already bytes) and decodes the
// answer into out when out is non-nil.
func (c *apiClient) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			// The deadline or an interrupt, said plainly rather than as
			// the transport's "Post <url>: context deadline exceeded".
			return fmt.Errorf("memhost at %s: %w", c.base, context.Cause(ctx))
		}
		return fmt.Errorf("%w%s", &transportError{base: c.base, err: err}, connectHint(err, "--local to start the plugins in this process"))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 300 {
		if lines, ok := out.(streamLines); ok {
			return c.readLines(resp.Body, lines)
		}
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("memhost at %s: %w", c.base, err)
	}
	if resp.StatusCode >= 300 {
		return c.answerError(resp.StatusCode, data)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			// Not a decoder's complaint about Go types: the answer is
			// another server's, or a broken one.
			return &callError{Status: resp.StatusCode, foreign: c.notMemhost(resp.StatusCode, data)}
		}
	}
	return nil
}

// addr is where the client calls, as the operator gave it.
func (c *apiClient) addr() string { return strings.TrimPrefix(c.base, "http://") }

// notMemhost says that an answer is none memhost gives: its status and,
// at most, a short excerpt on one line (not a whole HTML page).
func (c *apiClient) notMemhost(status int, data []byte) string {
	msg := fmt.Sprintf("the answer from %s is not memhost's: %d %s", c.addr(), status, http.StatusText(status))
	if excerpt := oneLineExcerpt(data, 60); excerpt != "" {
		msg += ", " + excerpt
	}
	return msg
}

// oneLineExcerpt is data's start as one line of at most limit runes, its
// white space and control characters each a space.
func oneLineExcerpt(data []byte, limit int) string {
	var b strings.Builder
	n, space := 0, false
	for _, r := range strings.ToValidUTF8(string(data), "\uFFFD") {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = true
			continue
		}
		if n == limit {
			b.WriteString(" …")
			break
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// transportError is a request that got no answer, said once and plainly:
// not as Go's `Post "<url>": dial tcp <addr>: connect: <problem>`, which
// names the address twice and how it was dialled.
type transportError struct {
	base string
	err  error
}

func (e *transportError) Unwrap() error { return e.err }

func (e *transportError) Error() string {
	addr := strings.TrimPrefix(e.base, "http://")
	var op *net.OpError
	if errors.As(e.err, &op) && op.Op == "dial" {
		return fmt.Sprintf("cannot reach memhost at %s: %s", addr, plainNetProblem(e.err))
	}
	return fmt.Sprintf("lost the connection to memhost at %s: %s", addr, plainNetProblem(e.err))
}

// plainNetProblem is the innermost words of a transport error: "connection
// refused", "no such host".
func plainNetProblem(err error) string {
	var dns *net.DNSError
	var errno syscall.Errno
	switch {
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return "no such host"
		}
		return dns.Err
	case errors.As(err, &errno):
		return errno.Error()
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "it closed the connection without answering"
	}
	// Peel the layers that repeat the method, URL and address.
	for {
		var ue *url.Error
		var op *net.OpError
		var se *os.SyscallError
		switch {
		case errors.As(err, &ue) && ue.Err != nil:
			err = ue.Err
		case errors.As(err, &op) && op.Err != nil:
			err = op.Err
		case errors.As(err, &se) && se.Err != nil:
			err = se.Err
		default:
			return err.Error()
		}
	}
}

// callWithin is call bounded by d: one request of a long command (an
// export's page, an import's batch) against a server that stopped
// answering fails instead of waiting forever.
func (c *apiClient) callWithin(ctx context.Context, d time.Duration, method, path string, body, out any) error {
	ctx, cancel := withDeadline(ctx, d)
	defer cancel()
	return c.call(ctx, method, path, body, out)
}

// errNoAnswer is the cause of a command's or a request's deadline.
var errNoAnswer = errors.New("no answer in time")

// withDeadline is context.WithTimeout whose expiry says how long was waited.
func withDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("%w (waited %s; the server may be overloaded or hung)", errNoAnswer, d))
}

// answerError is the callError of an error answer's body; a body that is
// no memhost error (a proxy's or another server's page) is said to be so.
func (c *apiClient) answerError(status int, data []byte) error {
	var e struct {
		Error struct{ Code, Message string }
	}
	if json.Unmarshal(data, &e) != nil || e.Error.Code == "" {
		return &callError{Status: status, Code: http.StatusText(status), foreign: c.notMemhost(status, data)}
	}
	ce := &callError{Status: status, Code: e.Error.Code, Message: e.Error.Message}
	if status == http.StatusUnauthorized {
		ce.Message += unauthenticatedHint()
	}
	return ce
}

// unauthenticatedHint names the one thing a client needs for a 401.
func unauthenticatedHint() string {
	if os.Getenv(TokenEnv) == "" {
		return fmt.Sprintf(" (this server wants a token: set %s to its secret)", TokenEnv)
	}
	return fmt.Sprintf(" (%s holds no token this server accepts)", TokenEnv)
}

// connectHint says what to do when nothing listens at the address:
// start a server, or use alternative.
func connectHint(err error, alternative string) string {
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return ""
	}
	return "\nNo memhost listens there: start one with `memhost serve`, or use " + alternative
}

// clientToken answers the token in TokenEnv, refusing one an HTTP header
// cannot carry: a secret is visible ASCII, so a line end or space (a
// secret pasted with its newline) is a mistake to say plainly, where the
// request failed naming a Go package.
func clientToken() (string, error) {
	secret := os.Getenv(TokenEnv)
	if i := strings.IndexFunc(secret, func(r rune) bool { return r <= ' ' || r > '~' }); i >= 0 {
		_, n := utf8.DecodeRuneInString(secret[i:])
		return "", fmt.Errorf("%s holds %q at byte %d: a token is visible ASCII without spaces (a copied secret's line end?)", TokenEnv, secret[i:i+n], i)
	}
	return secret, nil
}

// checkAddr refuses an --addr that names no memhost server: host:port or
// an http(s) URL, whose path is a prefix a reverse proxy serves memhost
// under (the commands add /v1/...), with neither query nor fragment.
func checkAddr(addr string) error {
	u, err := url.Parse(baseURL(addr))
	switch {
	case err != nil || u.Host == "" || strings.ContainsAny(addr, " \t\r\n"):
		return fmt.Errorf("--addr %q is no address: give host:port or an http(s) URL, e.g. 127.0.0.1:7077", addr)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("--addr %q: memhost speaks http or https, not %s", addr, u.Scheme)
	case u.RawQuery != "" || u.Fragment != "" || strings.Contains(addr, "?"):
		return fmt.Errorf("--addr %q: give the server's address without a query (%s://%s%s)", addr, u.Scheme, u.Host, u.Path)
	case strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/v1"):
		return fmt.Errorf("--addr %q: give the server's address without /v1: the commands add it", addr)
	case strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/mcp"):
		return fmt.Errorf("--addr %q: that is the MCP endpoint (for memhost mcp --addr); give the server's address", addr)
	}
	return checkPort(addr)
}

// checkPort refuses an address given as host:port without its port
// ("127.0.0.1", "127.0.0.1:"): the HTTP client would call port 80, the
// token with it, where no memhost listens by default. A URL with a
// scheme and no port ("https://memhost.example") keeps its scheme's port:
// a reverse proxy serves memhost there.
func checkPort(addr string) error {
	u, err := url.Parse(baseURL(addr))
	if err != nil || u.Host == "" {
		return nil // checkAddr names the problem
	}
	if strings.HasSuffix(u.Host, ":") || !strings.Contains(addr, "://") && u.Port() == "" {
		_, port, _ := net.SplitHostPort(config.DefaultListen)
		return fmt.Errorf("--addr %q has no port: give host:port, e.g. %s (memhost's default port), or an http(s) URL", addr, net.JoinHostPort(u.Hostname(), port))
	}
	return nil
}

// baseURL is the API's base URL for an address given as host:port or URL.
func baseURL(addr string) string {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimRight(addr, "/")
}

// streamLines, passed as call's out, takes a JSON Lines answer line by line
// as it streams in.
type streamLines func(line []byte) error

func (c *apiClient) readLines(body io.Reader, each streamLines) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if err := each(sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("memhost at %s: %w", c.base, err)
	}
	return nil
}

// printJSON writes v indented to w.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// commandContext bounds a one-shot command.
func commandContext(cmd *cobra.Command, d time.Duration) (context.Context, context.CancelFunc) {
	return withDeadline(cmd.Context(), d)
}

func rememberCommand() *cobra.Command {
	var f clientFlags
	var realm, scope, kind, title, body, description string
	var tags []string
	cmd := &cobra.Command{
		Use:   "remember",
		Short: "Store one record",
		Long: `Store one record through the API and print its id. The body is --body,
or standard input when --body is "-" (without its final line end).`,
		Example: `  memhost remember --scope identity:alice --kind preference --title "Coffee order" --body "No sugar."
  echo "Deploys go out on Tuesdays." | memhost remember --scope realm --kind fact --title Deploys --body -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if body == "-" {
				data, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return err
				}
				if !utf8.Valid(data) {
					return errors.New("standard input is not valid UTF-8 text (memhost keeps text as UTF-8; convert it first, e.g. with iconv)")
				}
				body = trimOneNewline(string(data))
			}
			return f.run(cmd, func(ctx context.Context, c *apiClient) error {
				rec := map[string]any{"scope": scope, "kind": kind, "title": title, "body": body, "description": description, "tags": splitTags(tags)}
				var out struct {
					IDs          []string `json:"ids"`
					TagsNotAdded []struct {
						Tags []string `json:"tags"`
					} `json:"tags_not_added"`
				}
				if err := c.call(ctx, "POST", "/v1/records", map[string]any{"realm": realm, "records": []any{rec}}, &out); err != nil {
					return err
				}
				if len(out.IDs) != 1 {
					return errors.New("the server answered no id")
				}
				for _, n := range out.TagsNotAdded {
					fmt.Fprintf(cmd.ErrOrStderr(), "already stored as %s, whose tags stay as they were: %s not added (forget it and remember it again to change its tags)\n", out.IDs[0], strings.Join(n.Tags, ", "))
				}
				fmt.Fprintln(cmd.OutOrStdout(), out.IDs[0])
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&realm, "realm", "", "realm (default: the server's default realm)")
	cmd.Flags().StringVar(&scope, "scope", "", "identity:<id>, mob:<name>, operator:<name> or realm (required)")
	cmd.Flags().StringVar(&kind, "kind", "fact", "preference, fact, gotcha, procedure, relationship, open_loop, reference or episode")
	cmd.Flags().StringVar(&title, "title", "", "title")
	cmd.Flags().StringVar(&description, "description", "", "one-line description")
	cmd.Flags().StringVar(&body, "body", "", `body text, or "-" for standard input`)
	cmd.Flags().StringArrayVar(&tags, "tag", nil, "a tag (repeat for more, or separate with commas)")
	_ = cmd.MarkFlagRequired("scope")
	return cmd
}

// splitTags splits each --tag value at its commas (no tag holds one). The
// flag is no CSV list: a tag's quotes are its own, kept as given.
func splitTags(values []string) []string {
	var tags []string
	for _, v := range values {
		if v == "" {
			continue // --tag "": no tag, as before
		}
		tags = append(tags, strings.Split(v, ",")...)
	}
	return tags
}

// trimOneNewline drops the one line end that `echo` or a file's last line
// adds to standard input; any further blank lines are the body's own.
func trimOneNewline(s string) string {
	if t, ok := strings.CutSuffix(s, "\n"); ok {
		return strings.TrimSuffix(t, "\r")
	}
	return s
}

func recallCommand() *cobra.Command {
	var f clientFlags
	var realm, identity string
	var limit int
	var tags []string
	cmd := &cobra.Command{
		Use:     "recall QUERY",
		Short:   "Recall the records most relevant to a query for an identity",
		Example: `  memhost recall --identity alice "how does alice take her coffee"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, func(ctx context.Context, c *apiClient) error {
				var out json.RawMessage
				req := map[string]any{"identity": map[string]string{"realm": realm, "id": identity}, "query": args[0], "limit": limit, "tags": splitTags(tags)}
				if err := c.call(ctx, "POST", "/v1/recall", req, &out); err != nil {
					return err
				}
				return printJSON(cmd.OutOrStdout(), out)
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&realm, "realm", "", "realm (default: the server's default realm)")
	cmd.Flags().StringVar(&identity, "identity", "", "the identity recalling (required)")
	cmd.Flags().IntVar(&limit, "limit", 10, "most hits to answer")
	cmd.Flags().StringArrayVar(&tags, "tag", nil, "a tag every hit must carry (repeat for more, or separate with commas)")
	_ = cmd.MarkFlagRequired("identity")
	return cmd
}

func injectCommand() *cobra.Command {
	var f clientFlags
	var realm, identity, session string
	var raw bool
	cmd := &cobra.Command{
		Use:   "inject CONTENT",
		Short: "Show what memory a turn's content would inject into an agent's context",
		Long: `Ask for the per-turn injection of CONTENT in a session, exactly as an agent
runtime would, and print the injected context (or --json for the whole answer).
The session's budget and dedup state are updated as for a real turn.`,
		Example: `  memhost inject --identity alice --session s1 "espresso, please"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, func(ctx context.Context, c *apiClient) error {
				var out struct {
					InjectedContext []string `json:"injected_context"`
					SkipReason      *string  `json:"skip_reason"`
				}
				var rawOut json.RawMessage
				req := map[string]any{"identity": map[string]string{"realm": realm, "id": identity}, "session": session, "content": args[0]}
				if err := c.call(ctx, "POST", "/v1/turns/inject", req, &rawOut); err != nil {
					return err
				}
				if raw {
					return printJSON(cmd.OutOrStdout(), rawOut)
				}
				if err := json.Unmarshal(rawOut, &out); err != nil {
					return err
				}
				if out.SkipReason != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "nothing injected: %s\n", *out.SkipReason)
				}
				for _, block := range out.InjectedContext {
					fmt.Fprintln(cmd.OutOrStdout(), block)
				}
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&realm, "realm", "", "realm (default: the server's default realm)")
	cmd.Flags().StringVar(&identity, "identity", "", "the agent's identity (required)")
	cmd.Flags().StringVar(&session, "session", "", "the agent session (required)")
	cmd.Flags().BoolVar(&raw, "json", false, "print the whole answer as JSON")
	_ = cmd.MarkFlagRequired("identity")
	_ = cmd.MarkFlagRequired("session")
	return cmd
}
