// Package httpapi serves memhost's HTTP API v1 (DESIGN Appendix A): JSON
// in and out, errors as {"error":{"code","message"}} with a stable code,
// bearer tokens bound to realms.
package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/guide"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/hybrid"
	"github.com/memhost/memhost/internal/mcpserver"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/internal/proposal"
	"github.com/memhost/memhost/internal/redact"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/fairgate"
)

// DefaultMaxBodyBytes bounds a request body when the config sets none: a
// full batch of maximum-size records is far larger, so big imports go in
// several requests.
const DefaultMaxBodyBytes = 8 << 20

// Caller roles (DESIGN 5.3). An application is trusted to write shared
// scopes and administer a realm; an agent's writes to a shared scope are
// proposals until an application approves them.
const (
	RoleApplication = "application"
	RoleAgent       = "agent"
)

// Token is a bearer token, the realms it may touch, its caller's role
// (RoleAgent when empty) and the identities it may act as (any when
// empty; see identity.go).
type Token struct {
	Name       string
	Secret     string
	Realms     []string
	Role       string
	Identities []string
	// MaxInFlight bounds the token's requests being served at once
	// (DefaultMaxInFlight when 0); one beyond it is answered 429.
	MaxInFlight int
}

// Plugins reports plugin health for /readyz and /v1/plugins.
type Plugins interface {
	Status() []pluginhost.Status
	Ready() bool
}

// Options are the server's dependencies.
type Options struct {
	Logger hclog.Logger
	// Provider answers the provider serving a realm; an unknown realm is an
	// error wrapping sdk.ErrNotFound.
	Provider     func(realm string) (sdk.Provider, error)
	DefaultRealm string
	// Realms are the realms the config names (the default realm and every
	// realm block): a token holding all of them, as an application not
	// bound to identities, is the host's operator (caller.operator).
	Realms []string
	// Tokens, when any, are required on every /v1 request.
	Tokens []Token
	// HostKey keys the listing cursors a bound token is given, so every
	// host sharing it reads another's; without it, cursors hold within
	// this process only.
	HostKey      []byte
	Plugins      Plugins
	MaxBodyBytes int64
	// RequestTimeout bounds each request's work (default 30s).
	RequestTimeout time.Duration
	// ReindexTimeout bounds a reindex request instead (default 30m).
	ReindexTimeout time.Duration
	Metrics        *Metrics
	// Coordinator and Guide serve the memory endpoints.
	Coordinator *coordinator.Coordinator
	Guide       *guide.Sessions
	// Compaction serves the conversation endpoints; nil (or one without a
	// compactor) answers them 501.
	Compaction *compaction.Service
	// ReadyChecks run on every GET /readyz, after the plugins' health.
	ReadyChecks []ReadyCheck
	// MCP, when set, builds the MCP endpoint served at /mcp; bind answers
	// the identity of an authenticated request from its headers.
	MCP func(bind func(http.Header) (mcpserver.Caller, error)) http.Handler
	// Proposals, when set, notes, bounds and lists agents' proposals;
	// ProposalRetryAfter is the Retry-After of its refusal (proposals.go).
	Proposals          *proposal.Queue
	ProposalRetryAfter time.Duration
	// Traces, when set, serves the turn trace endpoints (trace.go).
	Traces TraceReader
	// Semantic, when set, reports the realms with semantic recall in
	// /v1/plugins and the metrics.
	Semantic SemanticStatus
}

// SemanticStatus reports each realm's semantic recall.
type SemanticStatus interface {
	Status() []hybrid.Status
}

// MCP request headers naming who the tools act for.
const (
	HeaderIdentity = "X-Memhost-Identity"
	HeaderRealm    = "X-Memhost-Realm"
)

// Server is the HTTP API.
type Server struct {
	opts    Options
	handler http.Handler
	// routes are the served operations, "METHOD /path", for the check
	// against the OpenAPI document.
	routes []string
	// reindex refuses a second reindex of a realm while one runs.
	reindex reindexGuard
	// cursors seals a bound token's listing cursor that would name a
	// record it may not read.
	cursors cursorSeal
	// digests are opts.Tokens' secrets' SHA-256, in order, which
	// authenticate compares with the one sent.
	digests [][sha256.Size]byte
	// inFlight counts each token's requests being served, in the order
	// of opts.Tokens (see admit).
	inFlight []atomic.Int64
	// readiness shares the ReadyChecks' runs among probes.
	readiness readiness
	// bodies holds the bytes of the large bodies being decoded and
	// served (readBody).
	bodies *fairgate.Gate
}

// New builds the server and its routes.
func New(opts Options) *Server {
	if opts.Logger == nil {
		// Not hclog's null logger: that one drops With's arguments, and
		// the coordinator reads the request id from this logger.
		opts.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Off})
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 30 * time.Second
	}
	if opts.ReindexTimeout <= 0 {
		opts.ReindexTimeout = pluginhost.DefaultReindexTimeout
	}
	if opts.DefaultRealm == "" {
		opts.DefaultRealm = sdk.DefaultRealm
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(opts.Plugins, nil)
	}
	opts.Tokens = slices.Clone(opts.Tokens)
	for i := range opts.Tokens {
		if opts.Tokens[i].MaxInFlight <= 0 {
			opts.Tokens[i].MaxInFlight = DefaultMaxInFlight
		}
	}
	s := &Server{opts: opts, inFlight: make([]atomic.Int64, len(opts.Tokens)), bodies: fairgate.New(largeBodiesHeld * opts.MaxBodyBytes), cursors: newCursorSeal(opts.HostKey)}
	for _, t := range opts.Tokens {
		s.digests = append(s.digests, sha256.Sum256([]byte(t.Secret)))
	}
	mux := http.NewServeMux()
	s.route(mux, "POST /v1/records", s.handleRemember)
	s.route(mux, "GET /v1/records/{id}", s.handleGet)
	s.route(mux, "DELETE /v1/records/{id}", s.handleForget)
	s.route(mux, "POST /v1/records/{id}/approve", s.handleApprove)
	s.route(mux, "POST /v1/records/{id}/reject", s.handleReject)
	s.route(mux, "GET /v1/proposals", s.handleListProposals)
	s.route(mux, "GET /v1/sessions/{key}/trace", s.handleSessionTrace)
	s.route(mux, "GET /v1/traces", s.handleTraces)
	s.route(mux, "GET /v1/scopes", s.handleScopes)
	s.route(mux, "GET /v1/records", s.handleListRecords)
	s.route(mux, "GET /v1/records/{id}/trace", s.handleRecordTrace)
	s.route(mux, "POST /v1/recall", s.handleRecall)
	s.route(mux, "POST /v1/manifest", s.handleManifest)
	s.route(mux, "POST /v1/turns/inject", s.handleInjectTurn)
	s.route(mux, "POST /v1/builds/inject", s.handleInjectBuild)
	s.route(mux, "POST /v1/defang", s.handleDefang)
	s.route(mux, "POST /v1/sessions/{key}/compacted", s.handleSessionCompacted)
	s.route(mux, "POST /v1/guide/session-start", s.handleGuideStart)
	s.route(mux, "POST /v1/guide/before-iteration", s.handleGuideIteration)
	s.route(mux, "POST /v1/conversations/{id}/compact", s.handleCompact)
	s.route(mux, "DELETE /v1/conversations/{id}", s.handleForgetConversation)
	s.route(mux, "POST /v1/export", s.handleExport)
	s.route(mux, "POST /v1/import", s.handleImport)
	s.routeWithin(mux, "POST /v1/admin/reindex", opts.ReindexTimeout, s.handleReindex)
	s.route(mux, "GET /v1/plugins", s.handlePlugins)
	if opts.MCP != nil {
		s.mountMCP(mux, opts.MCP(s.mcpCaller))
	}
	s.handle(mux, "GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeUnrouted(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	s.handle(mux, "GET /readyz", http.HandlerFunc(s.handleReady))
	s.handle(mux, "GET /metrics", opts.Metrics.Handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// The catch-all matches every method, so the mux's own 405 never
		// fires: a known path with a wrong method is answered here.
		if allow := allowedMethods(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			s.refuseUnrouted(w, r, fmt.Errorf("%s is not allowed on %s (allowed: %s): %w", r.Method, r.URL.Path, strings.Join(allow, ", "), errMethodNotAllowed))
			return
		}
		s.refuseUnrouted(w, r, noEndpoint{method: r.Method, path: r.URL.Path})
	})
	s.handler = s.refuseCrossOrigin(s.Front(mux))
	return s
}

// Front is what stands before every handler the host serves, the API's
// and any mux it is served behind (the console's), and before that mux's
// own path handling:
//   - a path with an empty, "." or ".." segment is no endpoint: a mux
//     would redirect it, before authentication and outside the error
//     envelope, to the path it cleans to (a client that follows re-sends
//     its body to another endpoint than the one it named);
//   - every answer has a write deadline (a route sets its own after).
func (s *Server) Front(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answerBy(w, s.opts.RequestTimeout)
		// As sent: an escaped slash (%2F) is part of a segment, such as
		// an id the route then refuses by name.
		p := r.URL.EscapedPath()
		clean := path.Clean(p)
		if strings.HasSuffix(p, "/") && clean != "/" {
			clean += "/"
		}
		if p != "" && clean != p {
			s.refuseUnrouted(w, r, fmt.Errorf("no such endpoint: the path has an empty, . or .. segment; send it in its clean form: %w", sdk.ErrNotFound))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// HeaderRequestID carries a request's id: the client's own when it sends a
// safe one, else a fresh one. It is echoed in the answer, in an error body
// and in every log line of the request.
const HeaderRequestID = "X-Request-Id"

// requestID answers the client's request id when it is a short safe token,
// else a new random one.
func requestID(r *http.Request) string {
	if id, ok := clientRequestID(r); ok {
		return id
	}
	return freshRequestID()
}

// clientRequestID answers the client's request id when it is a short safe
// token.
func clientRequestID(r *http.Request) (string, bool) {
	id := r.Header.Get(HeaderRequestID)
	return id, id != "" && len(id) <= 64 && sdk.ValidateID(id) == nil
}

func freshRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// logIDs are the fields naming a request in its log lines: request_id,
// the id its answer carries, and when that is the client's own, the
// host's own id for it as host_request_id. A client may send any safe id,
// another request's too: host_request_id tells apart the lines of two
// requests sent under one id.
func logIDs(r *http.Request, reqID string) []any {
	if id, ok := clientRequestID(r); ok && id == reqID {
		return []any{"request_id", reqID, "host_request_id", freshRequestID()}
	}
	return []any{"request_id", reqID}
}

// msSince is the elapsed time in milliseconds, the unit every duration in
// the logs is given in.
func msSince(t time.Time) float64 {
	return float64(time.Since(t).Microseconds()) / 1000
}

// allowedMethods answers the methods some route other than the catch-all
// serves on r's path.
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	return allow
}

// Handler is the root handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Routes lists the served operations as "METHOD /path", sorted.
func (s *Server) Routes() []string { return slices.Sorted(slices.Values(s.routes)) }

// handle registers an operation that needs no API prologue.
func (s *Server) handle(mux *http.ServeMux, pattern string, h http.Handler) {
	s.routes = append(s.routes, pattern)
	mux.Handle(pattern, h)
}

// caller is the authenticated principal of a request.
type caller struct {
	token *Token // nil when the server runs without tokens
	slot  int    // the token's place in Options.Tokens
}

// actor names the caller's token to the coordinator's inbound gate,
// whose fairness it keys (coordinator.WithActor), for the requests that
// carry client text to defang.
func (c caller) actor(ctx context.Context) context.Context {
	if c.token == nil {
		return ctx
	}
	return coordinator.WithActor(ctx, c.token.Name)
}

// application reports whether the caller has the application role. A
// server without tokens listens for its own host's processes, which are
// the application.
func (c caller) application() bool { return c.token == nil || c.token.Role == RoleApplication }

// requireApplication refuses an agent's call; what is the verb phrase of
// what it may not do ("list proposals").
func (c caller) requireApplication(what string) error {
	if c.application() {
		return nil
	}
	return fmt.Errorf("token %q has the agent role; only an application token may %s: %w", c.token.Name, what, sdk.ErrPermission)
}

type apiHandler func(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error

// route wraps a /v1 handler with authentication, a deadline, metrics and
// the error envelope.
func (s *Server) route(mux *http.ServeMux, pattern string, h apiHandler) {
	s.routeWithin(mux, pattern, s.opts.RequestTimeout, h)
}

// routeWithin is route with a deadline of its own, for the long requests.
func (s *Server) routeWithin(mux *http.ServeMux, pattern string, timeout time.Duration, h apiHandler) {
	s.routes = append(s.routes, pattern)
	serving := s.opts.Metrics.servingGauge(pattern)
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		serving.Inc()
		defer serving.Dec()
		start := time.Now()
		if timeout != s.opts.RequestTimeout {
			answerBy(w, timeout) // Front set the default one
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		reqID := requestID(r)
		rec.Header().Set(HeaderRequestID, reqID)
		logger := s.opts.Logger.With(logIDs(r, reqID)...)
		err := func() error {
			c, err := s.authenticate(r.Header)
			if err != nil {
				return err
			}
			release, err := s.admit(rec, c, 1)
			if err != nil {
				return err
			}
			defer release()
			r := withBodyHolder(r, c)
			if err := checkQuery(pattern, r.URL.RawQuery); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(r.Context(), timeout)
			defer cancel()
			// Code below the API logs through hclog.FromContext, so every
			// line of the request carries its id.
			ctx = hclog.WithContext(ctx, logger)
			return h(ctx, c, rec, r)
		}()
		switch {
		case err != nil && r.Context().Err() != nil:
			// The client went away (it closed its connection): no one
			// reads an answer, and what its leaving made fail is no
			// failure of the server's.
			rec.status = StatusClientClosed
			logger.Info("request abandoned by its client", "route", pattern, "duration_ms", msSince(start), "error", logText(err))
		case err != nil && rec.wrote:
			// The answer is under way: the error can only be logged.
			logger.Error("request failed after its answer began", "route", pattern, "status", rec.status, "duration_ms", msSince(start), "error", logText(err))
		case err != nil:
			sanitised := s.writeError(rec, err, reqID)
			// A client's mistake (4xx) or an unsupported capability (501)
			// is the client's to fix: it is not an operator's error.
			switch {
			case rec.status >= 500 && rec.status != http.StatusNotImplemented:
				logger.Error("request failed", "route", pattern, "status", rec.status, "duration_ms", msSince(start), "error", logText(err))
			case sanitised:
				// The client got the message without paths or pids; the
				// operator gets them here.
				logger.Warn("request refused", "route", pattern, "status", rec.status, "error", logText(err))
			default:
				logger.Debug("request refused", "route", pattern, "status", rec.status, "error", logText(err))
			}
		}
		s.opts.Metrics.observeRequest(pattern, rec.status, time.Since(start))
	})
}

func (s *Server) authenticate(header http.Header) (caller, error) {
	if len(s.opts.Tokens) == 0 {
		return caller{}, nil
	}
	const prefix = "Bearer "
	// Two Authorization headers are ambiguous: a proxy in front may have
	// checked the one this server would not act on.
	if values := header.Values("Authorization"); len(values) > 1 {
		return caller{}, fmt.Errorf("the request carries %d Authorization headers; send exactly one: %w", len(values), errUnauthenticated)
	}
	h := header.Get("Authorization")
	// The scheme's name is case-insensitive (RFC 9110 §11.1).
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return caller{}, fmt.Errorf("an Authorization: Bearer token is required: %w", errUnauthenticated)
	}
	// Digests are compared, every token's, so the time taken tells
	// neither a secret's length nor which token matched.
	sent := sha256.Sum256([]byte(h[len(prefix):]))
	var found *Token
	slot := 0
	for i, want := range s.digests {
		if subtle.ConstantTimeCompare(sent[:], want[:]) == 1 && found == nil {
			found, slot = &s.opts.Tokens[i], i
		}
	}
	if found == nil {
		return caller{}, fmt.Errorf("the bearer token is not recognised: %w", errUnauthenticated)
	}
	return caller{token: found, slot: slot}, nil
}

// realm resolves the realm a request names (the default when empty) and
// checks the caller may touch it. The refusal is the same whether or not
// the realm exists, so it reveals nothing about other tenants.
func (s *Server) realm(c caller, name string) (string, error) {
	if name == "" {
		name = s.opts.DefaultRealm
	}
	if err := sdk.ValidateRealm(name); err != nil {
		return "", err
	}
	if c.token != nil {
		allowed := false
		for _, r := range c.token.Realms {
			allowed = allowed || r == name
		}
		if !allowed {
			return "", fmt.Errorf("token %q may not access realm %q: %w", c.token.Name, name, sdk.ErrPermission)
		}
	}
	return name, nil
}

// provider resolves the realm and its provider.
func (s *Server) provider(c caller, realmName string) (string, sdk.Provider, error) {
	realm, err := s.realm(c, realmName)
	if err != nil {
		return "", nil, err
	}
	p, err := s.opts.Provider(realm)
	if err != nil {
		return "", nil, err
	}
	return realm, p, nil
}

// mountMCP serves the MCP endpoint behind the same authentication, body
// limit and metrics as /v1.
func (s *Server) mountMCP(mux *http.ServeMux, h http.Handler) {
	const pattern = "/mcp"
	s.routes = append(s.routes, "POST "+pattern)
	serving := s.opts.Metrics.servingGauge(pattern)
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		serving.Inc()
		defer serving.Dec()
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		reqID := requestID(r)
		rec.Header().Set(HeaderRequestID, reqID)
		logger := s.opts.Logger.With(logIDs(r, reqID)...)
		err := mcpHeader(r)
		var c caller
		if err == nil {
			_, c, err = s.mcpIdentity(r.Header)
		}
		if err == nil {
			var release func()
			if release, err = s.admit(rec, c, 1); err == nil {
				defer release()
			}
		}
		if err == nil {
			err = contentCoding(r)
		}
		if err == nil && r.Method == http.MethodPost {
			// strictMCPBody puts back the body it read on the request it
			// is given: the one served below.
			r = withBodyHolder(r, c)
			var calls int
			calls, err = s.strictMCPBody(rec, r)
			// The SDK runs a batch's calls at once: each counts against
			// the token's bound, not the one request that carried them. A
			// batch over the bound itself is refused as such: a 429 and its
			// Retry-After would have the client send it again for ever.
			if err == nil && c.token != nil && calls > c.token.MaxInFlight {
				err = &sdk.FieldError{Field: "request body", Problem: fmt.Sprintf("is a batch of %d messages, over token %q's max_in_flight of %d; send at most %d at a time", calls, c.token.Name, c.token.MaxInFlight, c.token.MaxInFlight), Err: sdk.ErrInvalid}
			}
			if err == nil && calls > 1 {
				var release func()
				if release, err = s.admit(rec, c, calls-1); err == nil {
					defer release()
				}
			}
		}
		switch {
		case err != nil && r.Context().Err() != nil:
			// The client went away while it sent its request (its body
			// cut short): as on /v1, no one reads a refusal, and the
			// request is no bad one of the client's.
			rec.status = StatusClientClosed
			logger.Info("request abandoned by its client", "route", pattern, "duration_ms", msSince(start), "error", logText(err))
		case err != nil:
			s.writeError(rec, err, reqID)
		default:
			r.Body = http.MaxBytesReader(rec, r.Body, s.opts.MaxBodyBytes)
			// The tools' coordinator lines carry the id, as /v1's do.
			r = r.WithContext(hclog.WithContext(r.Context(), logger))
			answer := &mcpAnswer{ResponseWriter: rec}
			h.ServeHTTP(answer, r)
			if !answer.writeRenderedError(s.opts.Coordinator) {
				if err := answer.refusal(r, s.opts.MaxBodyBytes); err != nil {
					s.writeError(rec, err, reqID)
				}
			}
			if r.Context().Err() != nil {
				// The client went away before its answer (the answer to a
				// call cancelled with it, if any, reached no one): as on
				// /v1, neither a success nor a failure of the server's.
				rec.status = StatusClientClosed
				logger.Info("request abandoned by its client", "route", pattern, "duration_ms", msSince(start))
			}
		}
		s.opts.Metrics.observeRequest(pattern, rec.status, time.Since(start))
	})
}

// logText is err's text as a request's log line carries it, bounded
// (redact.ForLog): an error may quote the request's text whole.
func logText(err error) string {
	return redact.ForLog(err.Error())
}

// StatusClientClosed is the status the metrics and log record for a
// request whose client went away before its answer (as nginx's 499): no
// status reached the client, and it is not the server's failure.
const StatusClientClosed = 499

// AnswerWriteTimeout bounds how long an answer may take to reach its
// client once written: a client that stops reading would otherwise hold
// its request, and the answer's memory, until it disconnects.
var AnswerWriteTimeout = 30 * time.Second

// answerBy gives a request's whole answer a write deadline: its work's
// own timeout and AnswerWriteTimeout beyond it (a streamed answer, the
// reindex progress, is written as the work goes). writeBuffer moves it
// closer once a buffered answer is ready.
func answerBy(w http.ResponseWriter, work time.Duration) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(work + AnswerWriteTimeout))
}

// mcpCaller answers who an MCP request acts for: its identity (see
// mcpIdentity) and its token's name, to which its proposals are counted.
func (s *Server) mcpCaller(header http.Header) (mcpserver.Caller, error) {
	id, c, err := s.mcpIdentity(header)
	return mcpserver.Caller{Identity: id, Token: c.name()}, err
}

// mcpIdentity authenticates an MCP request and answers the identity its
// headers name (or ?identity=, folded in by mcpHeader), in a realm its
// token may touch and as an identity the token may act as. A token bound
// to exactly one identity makes it the default.
func (s *Server) mcpIdentity(header http.Header) (sdk.Identity, caller, error) {
	c, err := s.authenticate(header)
	if err != nil {
		return sdk.Identity{}, c, err
	}
	realm, err := s.realm(c, header.Get(HeaderRealm))
	if err != nil {
		return sdk.Identity{}, c, err
	}
	id := sdk.Identity{Realm: realm, ID: header.Get(HeaderIdentity)}
	if id.ID == "" && c.bound() && len(c.token.Identities) == 1 {
		id.ID = c.token.Identities[0]
	}
	if id.ID == "" {
		return sdk.Identity{}, c, badRequest("the %s header (or ?%s=) is required on /mcp", HeaderIdentity, QueryIdentity)
	}
	if err := id.Validate(); err != nil {
		return sdk.Identity{}, c, err
	}
	if err := c.actAs(id.ID); err != nil {
		return sdk.Identity{}, c, err
	}
	return id, c, nil
}

// ReadyCheck is a readiness condition beyond the plugins' health: the
// shared state's schema, say. Check answers nil when ready; an error
// wrapping sdk.ErrUnavailable or sdk.ErrDeadline means it could not tell
// (the database is down) and leaves the host ready, since an outage of a
// shared database must not take every host out of the pool at once (calls
// answer 503 meanwhile); any other error is "not ready".
type ReadyCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// handleReady answers whether every plugin is up and every ReadyCheck
// passes. Probes carry no token, so with tokens configured an
// unauthenticated caller learns only that: plugin names, versions, pids,
// paths and errors need a valid token.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	pluginsReady := s.opts.Plugins == nil || s.opts.Plugins.Ready()
	failed := s.readyFailures(r.Context())
	if !pluginsReady || len(failed) > 0 {
		body := map[string]any{"status": "not ready"}
		if c, err := s.authenticate(r.Header); err == nil {
			if s.opts.Plugins != nil {
				body["plugins"] = s.pluginStatus(c)
			}
			if len(failed) > 0 {
				body["checks"] = failed
			}
		}
		s.writeUnrouted(w, http.StatusServiceUnavailable, body)
		return
	}
	s.writeUnrouted(w, http.StatusOK, map[string]string{"status": "ready"})
}

// writeUnrouted answers v outside a /v1 route, which would otherwise log
// and answer a v that cannot be encoded: here too it is logged and
// answered 500 in the error envelope, never as an empty success.
func (s *Server) writeUnrouted(w http.ResponseWriter, status int, v any) {
	if err := writeJSON(w, status, v); err != nil {
		s.opts.Logger.Error("answer failed", "status", http.StatusInternalServerError, "error", err)
		s.writeError(w, err, w.Header().Get(HeaderRequestID))
	}
}

// pluginStatus is the plugins' status as c may read it. An instance's
// last error and warnings are the operator's: they quote what its plugin
// logged, which names files, realms, identities and record ids of every
// realm the instance serves.
func (s *Server) pluginStatus(c caller) []pluginhost.Status {
	var st []pluginhost.Status
	if s.opts.Plugins != nil {
		st = s.opts.Plugins.Status()
	}
	if st == nil {
		return []pluginhost.Status{}
	}
	if !s.operator(c) {
		for i := range st {
			st[i].LastError, st[i].Warnings = "", nil
		}
	}
	return st
}

// operator reports whether c is the host's operator: every caller of a
// host without tokens (its own processes), else an application token not
// bound to identities that holds every realm the config names and every
// realm any token may touch. A realm needs no block to be served (it
// shares the default realm's provider), so the config's realms alone
// would let one tenant's token read another's warnings.
func (s *Server) operator(c caller) bool {
	if c.token == nil {
		return true
	}
	if !c.application() || c.bound() || !slices.Contains(c.token.Realms, s.opts.DefaultRealm) {
		return false
	}
	holds := func(realms []string) bool {
		for _, r := range realms {
			if !slices.Contains(c.token.Realms, r) {
				return false
			}
		}
		return true
	}
	if !holds(s.opts.Realms) {
		return false
	}
	for _, t := range s.opts.Tokens {
		if !holds(t.Realms) {
			return false
		}
	}
	return true
}

func (s *Server) handlePlugins(_ context.Context, c caller, w http.ResponseWriter, _ *http.Request) error {
	answer := map[string]any{"plugins": s.pluginStatus(c)}
	if s.opts.Semantic != nil {
		// Each entry names a realm and counts its records: a token is told
		// of its own realms only, as every other answer tells it. Its last
		// error is the operator's, as an instance's is: it quotes the
		// embedder's endpoint and what that answered.
		operator := s.operator(c)
		semantic := slices.DeleteFunc(s.opts.Semantic.Status(), func(st hybrid.Status) bool {
			return c.token != nil && !slices.Contains(c.token.Realms, st.Realm)
		})
		for i := range semantic {
			if !operator {
				semantic[i].LastError = ""
			}
		}
		answer["semantic"] = semantic
	}
	return writeJSON(w, http.StatusOK, answer)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	// wrote is set once the status line is sent: an error after that (a
	// streamed answer failing midway) can only be logged, as a second
	// status would be ignored and its envelope would garble the body.
	wrote bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status = code
	}
	r.wrote = true
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (the
// answer's write deadline).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush lets a streamed answer (reindex progress) reach the client line
// by line.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
