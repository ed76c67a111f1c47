// Package console is the operator console served at /ui: server-rendered
// pages over the host's own /v1 API, called in process with the signed-in
// application token, so the console sees exactly what that token may see
// and nothing the API does not document. Assets are embedded; nothing is
// fetched from elsewhere at run time.
package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Token is an API token the console may sign in with.
type Token struct {
	Name        string
	Secret      string
	Realms      []string
	Application bool
}

// Options are the console's dependencies.
type Options struct {
	// API is the host's /v1 handler, called in process.
	API http.Handler
	// Tokens, when any, require signing in with an application token;
	// without, the console is open, as the API is.
	Tokens []Token
	// Realms are the configured realms, the default first.
	Realms     []string
	SessionTTL time.Duration
	Logger     hclog.Logger
	// SampleEvery is how often the charts sample the host's metrics.
	SampleEvery time.Duration
	// RequestTimeout bounds a page's work, all its API reads together,
	// as it bounds each /v1 request (default 30 s).
	RequestTimeout time.Duration
	// Shared, when set, keeps the sign-ins where every host behind one
	// load balancer reads them, so a sign-in, its CSRF token and its
	// sign-out made through one host hold on all. Nil: this host's memory.
	Shared SharedSessions
}

// SharedSessions is a store of sign-ins shared by many hosts. A sign-in
// is known by the SHA-256 of its cookie (hex), never the cookie itself,
// and names its token (by name and a digest of its secret, "" on a
// console without tokens).
type SharedSessions interface {
	// Put stores a sign-in, then drops the token's oldest beyond perToken
	// and the oldest of all beyond total.
	Put(ctx context.Context, digest, token, csrf string, expires time.Time, perToken, total int) error
	// Get answers a sign-in not yet expired.
	Get(ctx context.Context, digest string) (token, csrf string, expires time.Time, found bool, err error)
	Delete(ctx context.Context, digest string) error
}

// DefaultSessionTTL bounds a sign-in.
const DefaultSessionTTL = 8 * time.Hour

// Prefix is where the console is mounted.
const Prefix = "/ui"

const (
	sessionCookie = "memhost_console"
	csrfField     = "csrf"
	maxSessions   = 1024
	// maxSessionsPerToken is one token's share of the sessions.
	maxSessionsPerToken = maxSessions / 8
)

// Console is the /ui handler.
type Console struct {
	opts    Options
	pages   map[string]*template.Template
	mux     *http.ServeMux
	mu      sync.Mutex
	session map[string]*session
	charts  *sampler
	// digests are opts.Tokens' secrets' SHA-256, in order, which the
	// sign-in compares with the one sent.
	digests [][sha256.Size]byte
}

// session is one signed-in browser (or, without tokens, one browser).
type session struct {
	id      string
	token   *Token // nil without tokens
	csrf    string
	expires time.Time
	// flash is the console's report of the session's last action, shown
	// once on the next page. It is kept here, not in the redirect's
	// query, so no link can write in the console's voice.
	flash string
}

// New builds the console. Close stops its metrics sampler.
func New(opts Options) (*Console, error) {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.SampleEvery <= 0 {
		opts.SampleEvery = 15 * time.Second
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 30 * time.Second
	}
	c := &Console{opts: opts, session: map[string]*session{}}
	for _, t := range opts.Tokens {
		c.digests = append(c.digests, sha256.Sum256([]byte(t.Secret)))
	}
	if err := c.parse(); err != nil {
		return nil, err
	}
	c.charts = newSampler(opts.API, opts.SampleEvery)
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /ui/login", c.loginPage)
	mux.HandleFunc("POST /ui/login", c.login)
	mux.HandleFunc("POST /ui/logout", c.signedIn(c.logout))
	mux.HandleFunc("GET /ui/{$}", c.signedIn(c.home))
	mux.HandleFunc("GET /ui/records", c.signedIn(c.records))
	mux.HandleFunc("GET /ui/record", c.signedIn(c.record))
	mux.HandleFunc("GET /ui/proposals", c.signedIn(c.proposals))
	mux.HandleFunc("POST /ui/proposals", c.signedIn(c.decide))
	mux.HandleFunc("GET /ui/traces", c.signedIn(c.traces))
	mux.HandleFunc("GET /ui/trace", c.signedIn(c.trace))
	mux.HandleFunc("GET /ui/plugins", c.signedIn(c.plugins))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such page", http.StatusNotFound)
	})
	c.mux = mux
	return c, nil
}

// Close stops the sampler.
func (c *Console) Close() { c.charts.close() }

// contentSecurityPolicy allows the console's own script and style and
// nothing else: no inline script or style, no frames, forms only to itself.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'; connect-src 'self'"

func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
		http.Error(w, "cross-site request refused", http.StatusForbidden)
		return
	}
	// One deadline for the page: its reads run in turn, each bounded only
	// by its own request timeout, and a hung provider would otherwise hold
	// a page of several reads past its answer's write deadline.
	ctx, cancel := context.WithTimeout(r.Context(), c.opts.RequestTimeout)
	defer cancel()
	c.mux.ServeHTTP(w, r.WithContext(ctx))
}

// sameOrigin refuses a state-changing request another site's page sent:
// the browser names the sender in Sec-Fetch-Site or Origin. A request
// naming neither (a script, not a browser) still needs the CSRF token.
func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	return true
}

// secure reports whether the browser reached the host over TLS (directly,
// or through a proxy that says so).
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// current answers the request's live session, if any; an error only
// when the shared sign-ins cannot be read.
func (c *Console) current(r *http.Request) (*session, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, nil
	}
	if c.opts.Shared != nil {
		return c.shared(r.Context(), ck.Value)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.session[ck.Value]
	if s == nil || time.Now().After(s.expires) {
		delete(c.session, ck.Value)
		return nil, nil
	}
	return s, nil
}

// shared answers the sign-in of cookie from the shared store: another
// host may have made it or ended it. This host's copy keeps only what is
// its own (the flash).
func (c *Console) shared(ctx context.Context, cookie string) (*session, error) {
	key, csrf, expires, found, err := c.opts.Shared.Get(ctx, digest(cookie))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	token, known := c.tokenKeyed(key)
	if !found || !known || time.Now().After(expires) {
		delete(c.session, cookie)
		return nil, nil
	}
	if s := c.session[cookie]; s != nil && s.token == token && s.csrf == csrf {
		return s, nil
	}
	s := &session{id: cookie, token: token, csrf: csrf, expires: expires}
	c.keep(s)
	return s, nil
}

// tokenKeyed answers the application token whose sharedTokenKey is key
// (nil, known, for "" on a console without tokens); a token this host
// does not have, has with another secret (rotated since the sign-in) or
// with another role, is unknown.
func (c *Console) tokenKeyed(key string) (*Token, bool) {
	if len(c.opts.Tokens) == 0 {
		return nil, key == ""
	}
	for i := range c.opts.Tokens {
		if t := &c.opts.Tokens[i]; t.Application && sharedTokenKey(t) == key {
			return t, true
		}
	}
	return nil, false
}

// sharedTokenKey is how the shared store knows a sign-in's token: its
// name and a digest of its secret (never the secret, nor the SHA-256 the
// API compares), so a token whose secret was rotated no longer holds the
// sign-ins the old secret made, as a restart ends them in memory. ""
// without tokens.
func sharedTokenKey(t *Token) string {
	if t == nil {
		return ""
	}
	d := sha256.Sum256([]byte("memhost console sign-in\x00" + t.Secret))
	return t.Name + " " + hex.EncodeToString(d[:16])
}

// digest is how the shared store knows a cookie.
func digest(cookie string) string {
	d := sha256.Sum256([]byte(cookie))
	return hex.EncodeToString(d[:])
}

// start opens a session for token and sets its cookie.
func (c *Console) start(w http.ResponseWriter, r *http.Request, token *Token) (*session, error) {
	s := &session{id: randomToken(), token: token, csrf: randomToken(), expires: time.Now().Add(c.opts.SessionTTL)}
	if c.opts.Shared != nil {
		if err := c.opts.Shared.Put(r.Context(), digest(s.id), sharedTokenKey(token), s.csrf, s.expires, maxSessionsPerToken, maxSessions); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	c.keep(s)
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: s.id, Path: Prefix, MaxAge: int(c.opts.SessionTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r),
	})
	return s, nil
}

// keep adds s to this host's sessions, c.mu held. A token that holds its
// share of the table drops its own oldest sign-in, and a full table its
// oldest: one token signing in again and again must not sign other
// tokens (other tenants) out.
func (c *Console) keep(s *session) {
	now := time.Now()
	mine := 0
	var oldestMine, oldest *session
	for id, old := range c.session {
		if now.After(old.expires) {
			delete(c.session, id)
			continue
		}
		if old.token == s.token {
			mine++
			if oldestMine == nil || old.expires.Before(oldestMine.expires) {
				oldestMine = old
			}
		}
		if oldest == nil || old.expires.Before(oldest.expires) {
			oldest = old
		}
	}
	switch {
	case s.token != nil && mine >= maxSessionsPerToken:
		delete(c.session, oldestMine.id)
	case len(c.session) >= maxSessions:
		delete(c.session, oldest.id)
	}
	c.session[s.id] = s
}

// unavailable answers a page whose sign-in could not be read or stored.
func (c *Console) unavailable(w http.ResponseWriter, err error) {
	c.opts.Logger.Error("console sign-ins unavailable", "error", err)
	w.Header().Set("Retry-After", "5")
	http.Error(w, "the console's sign-ins cannot be reached: try again shortly", http.StatusServiceUnavailable)
}

type pageHandler func(w http.ResponseWriter, r *http.Request, s *session)

// signedIn runs h with the request's session: without tokens every
// browser gets one at once; with tokens an unknown browser is sent to
// sign in. A POST must carry the session's CSRF token.
func (c *Console) signedIn(h pageHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.current(r)
		if err != nil {
			c.unavailable(w, err)
			return
		}
		if s == nil {
			if len(c.opts.Tokens) > 0 {
				if r.Method != http.MethodGet {
					http.Error(w, "sign in first", http.StatusForbidden)
					return
				}
				http.Redirect(w, r, Prefix+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			if r.Method != http.MethodGet {
				http.Error(w, "this form has expired: reload the page", http.StatusForbidden)
				return
			}
			if s, err = c.start(w, r, nil); err != nil {
				c.unavailable(w, err)
				return
			}
		}
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil {
				http.Error(w, "bad form", http.StatusBadRequest)
				return
			}
			if subtle.ConstantTimeCompare([]byte(r.PostForm.Get(csrfField)), []byte(s.csrf)) != 1 {
				http.Error(w, "the form's CSRF token is missing or wrong: reload the page", http.StatusForbidden)
				return
			}
		}
		h(w, r, s)
	}
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if len(c.opts.Tokens) == 0 {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
		return
	}
	c.render(w, r, nil, "login", map[string]any{"Next": safeNext(r.URL.Query().Get("next"))})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if len(c.opts.Tokens) == 0 {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	// Digests are compared, every token's, as the API compares them, so
	// the time taken tells neither a secret's length nor which matched.
	sent := sha256.Sum256([]byte(r.PostForm.Get("token")))
	var found *Token
	for i, want := range c.digests {
		if subtle.ConstantTimeCompare(sent[:], want[:]) == 1 && found == nil {
			found = &c.opts.Tokens[i]
		}
	}
	next := safeNext(r.PostForm.Get("next"))
	switch {
	case found == nil:
		w.WriteHeader(http.StatusUnauthorized)
		c.render(w, r, nil, "login", map[string]any{"Next": next, "Error": "That token is not recognised."})
		return
	case !found.Application:
		w.WriteHeader(http.StatusForbidden)
		c.render(w, r, nil, "login", map[string]any{"Next": next, "Error": "Token " + found.Name + " has the agent role; the console needs an application token."})
		return
	}
	if _, err := c.start(w, r, found); err != nil {
		c.unavailable(w, err)
		return
	}
	c.opts.Logger.Info("console sign-in", "token", found.Name)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// safeNext keeps a post-sign-in redirect inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix+"/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return Prefix + "/"
	}
	return next
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) {
	if c.opts.Shared != nil {
		if err := c.opts.Shared.Delete(r.Context(), digest(s.id)); err != nil {
			c.unavailable(w, err)
			return
		}
	}
	c.mu.Lock()
	delete(c.session, s.id)
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
	http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
}

// realms answers the realms the session may see.
func (c *Console) realms(s *session) []string {
	if s.token == nil {
		return c.opts.Realms
	}
	return s.token.Realms
}

// realm answers the realm a request names, if the session may see it,
// else its first.
func (c *Console) realm(r *http.Request, s *session) string {
	rs := c.realms(s)
	want := r.URL.Query().Get("realm")
	for _, x := range rs {
		if x == want {
			return x
		}
	}
	if len(rs) == 0 {
		return ""
	}
	return rs[0]
}

// apiError is the API's error envelope.
type apiError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// call makes one in-process API request as the session's token.
func (c *Console) call(ctx context.Context, s *session, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, path, nil)
	if err != nil {
		return err
	}
	if s.token != nil {
		req.Header.Set("Authorization", "Bearer "+s.token.Secret)
	}
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	c.opts.API.ServeHTTP(rec, req)
	if ctx.Err() != nil && !rec.wrote {
		// The API answers nothing to a caller whose context ended.
		return &apiError{Status: http.StatusGatewayTimeout, Code: "deadline_exceeded", Message: fmt.Sprintf("no answer within the page's %s", c.opts.RequestTimeout)}
	}
	if rec.status >= 300 {
		var body struct{ Error apiError }
		_ = json.Unmarshal(rec.body.Bytes(), &body)
		body.Error.Status = rec.status
		if body.Error.Code == "" {
			body.Error.Code, body.Error.Message = "internal", http.StatusText(rec.status)
		}
		return &body.Error
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(rec.body.Bytes(), out)
}

// recorder is a minimal in-memory http.ResponseWriter.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
}
func (r *recorder) Write(b []byte) (int, error) { r.wrote = true; return r.body.Write(b) }

// page is what every template gets.
type page struct {
	Title   string
	Nav     string
	Realm   string
	Realms  []string
	Signed  string // the token's name; "" when open
	Open    bool
	CSRF    string
	Flash   string
	Error   string
	Data    any
	Version string
}

// render executes the named page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, s *session, name string, data any) {
	t, ok := c.pages[name]
	if !ok {
		http.Error(w, "no such page", http.StatusInternalServerError)
		return
	}
	p := page{Title: titles[name], Nav: name, Data: data, Open: len(c.opts.Tokens) == 0}
	if s != nil {
		p.CSRF, p.Realms, p.Realm = s.csrf, c.realms(s), c.realm(r, s)
		if s.token != nil {
			p.Signed = s.token.Name
		}
	}
	if s != nil {
		c.mu.Lock()
		p.Flash, s.flash = s.flash, ""
		c.mu.Unlock()
	}
	if m, ok := data.(map[string]any); ok {
		if e, ok := m["Error"].(string); ok {
			p.Error = e
		}
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		c.opts.Logger.Error("console: render", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.Copy(w, &buf)
}

// fail renders an API refusal on the page it broke.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, name string, err error) {
	var ae *apiError
	status := http.StatusInternalServerError
	msg := err.Error()
	if errors.As(err, &ae) {
		status, msg = ae.Status, ae.Message
	}
	w.WriteHeader(status)
	c.render(w, r, s, name, map[string]any{"Error": msg})
}

var titles = map[string]string{
	"login": "Sign in", "home": "Realms", "records": "Records", "record": "Record",
	"proposals": "Proposals", "traces": "Turn traces", "trace": "Turn trace", "plugins": "Plugins",
}

func (c *Console) parse() error {
	c.pages = map[string]*template.Template{}
	for name := range titles {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("console: template %s: %w", name, err)
		}
		c.pages[name] = t
	}
	return nil
}
