// Package openai is memhost's OpenAI-compatible embedder plugin: it asks
// any /embeddings endpoint (OpenAI, vLLM, TEI, Ollama, a llama.cpp server,
// a gateway) for one vector per text. A call the host makes is split into
// requests of request_batch texts, sent a few at a time; a request
// answered 429, 408 or 5xx, or lost on the way, is retried with
// exponential backoff and jitter (a Retry-After answer wins) while the
// host's deadline allows. An answer that is not exactly one vector of the
// configured dimensions per text is an error, never a stored vector.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/endpoint"
)

// Version is the plugin's version, reported by Info and the manifest.
const Version = "0.1.0"

// responseLimit bounds what the plugin reads of the answer to n texts of
// dims dimensions: every value as long as JSON writes a float (24 bytes,
// "-1.2345678901234567e-308", when a server prints float64s), each entry's
// other fields, and a megabyte for the rest of the answer or an error page.
// A fixed bound would refuse every answer of a large batch of long vectors
// (1000 x 3072 values from a server printing float64s is 70 MB), and let a
// one-text request read megabytes of junk.
func responseLimit(n, dims int) int {
	return 1<<20 + n*(32*dims+128)
}

// Embedder is the OpenAI-compatible embedder plugin.
type Embedder struct {
	client    *http.Client
	log       *slog.Logger
	lookupEnv func(string) (string, bool)
	// sleep waits d or until ctx ends; tests replace it to record the
	// delays instead of waiting them.
	sleep func(ctx context.Context, d time.Duration) error
	// now is the clock the retry warning is rate-limited by.
	now func() time.Time

	mu  sync.RWMutex
	cfg *settings

	// retryMu guards the retry warning's rate limit: the first retry is
	// logged, then at most one line a minute counting the retries since.
	// An endpoint answering 429 to everything would otherwise write a
	// line per retry: over a hundred a minute from one idle realm's
	// backlog, more with every realm and recall.
	retryMu       sync.Mutex
	retryLoggedAt time.Time
	retriesSince  int
}

// retryLogEvery is the least time between two retry warnings.
const retryLogEvery = time.Minute

// New answers an unconfigured embedder. Its client follows no redirect:
// following one would send the texts to a host the operator never
// configured, and Go keeps the Authorization header across a change of
// port or from https to http.
func New() *Embedder {
	return &Embedder{client: &http.Client{CheckRedirect: endpoint.NoRedirects}, log: sdk.Logger(), sleep: sleepCtx, now: time.Now}
}

func (e *Embedder) Info() sdk.Info {
	return sdk.Info{
		Name: "openai", Version: Version, Kinds: []sdk.PluginKind{sdk.KindEmbedder},
		Protocols: []int{sdk.ProtocolVersion}, ConfigSchema: json.RawMessage(configSchema),
	}
}

func (e *Embedder) Configure(_ context.Context, raw json.RawMessage) error {
	s, err := parseConfig(raw, e.lookupEnv)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.cfg = &s
	e.mu.Unlock()
	return nil
}

// ErrNotConfigured answers a call before Configure.
var ErrNotConfigured = fmt.Errorf("openai embedder is not configured: %w", sdk.ErrUnavailable)

func (e *Embedder) settings() (*settings, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.cfg == nil {
		return nil, ErrNotConfigured
	}
	return e.cfg, nil
}

func (e *Embedder) EmbedderInfo(context.Context) (sdk.EmbedderInfo, error) {
	cfg, err := e.settings()
	if err != nil {
		return sdk.EmbedderInfo{}, err
	}
	return cfg.info, nil
}

// Embed sends the texts in requests of request_batch, parallel at a time,
// and answers the vectors in the texts' order. The first failure cancels
// the requests still running.
func (e *Embedder) Embed(ctx context.Context, req sdk.EmbedRequest) ([][]float32, error) {
	cfg, err := e.settings()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, endpoint.ContextError(err)
	}
	inputs := make([]string, len(req.Texts))
	for i, t := range req.Texts {
		inputs[i] = cfg.prefix[req.Purpose] + t
	}
	out := make([][]float32, len(inputs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		slots = make(chan struct{}, cfg.parallel)
		// stopped: the call ended before every batch was sent.
		stopped bool
	)
	for start := 0; start < len(inputs); start += cfg.requestBatch {
		end := min(start+cfg.requestBatch, len(inputs))
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			stopped = true
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			vecs, err := e.embedBatch(ctx, cfg, inputs[start:end])
			if err != nil {
				once.Do(func() { first = err; cancel() })
				return
			}
			copy(out[start:end], vecs)
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if stopped {
		return nil, endpoint.ContextError(ctx.Err())
	}
	return out, nil
}

// The wire shapes of the embeddings API, as far as the plugin uses them.
type embeddingsRequest struct {
	Model      string   `json:"model"`
	Input      []string `json:"input"`
	Dimensions int      `json:"dimensions,omitempty"`
}

type embeddingsResponse struct {
	Data *[]struct {
		Index     *int   `json:"index"`
		Embedding vector `json:"embedding"`
	} `json:"data"`
}

// vector is an embedding as the endpoint writes it. A null component is
// refused: a JavaScript server writes NaN and Infinity as null, which
// would otherwise be read as 0, a wrong vector stored as a good one.
type vector []float32

var errNullComponent = errors.New("the answer has a null value in an embedding (NaN or Infinity, as a JavaScript server writes them)")

func (v *vector) UnmarshalJSON(b []byte) error {
	// A list of numbers holds the letters "null" only as the null literal.
	if bytes.Contains(b, []byte("null")) && strings.TrimSpace(string(b)) != "null" {
		return errNullComponent
	}
	return json.Unmarshal(b, (*[]float32)(v))
}

type apiError struct {
	Error struct {
		Message string `json:"message"`
	} `json:"error"`
}

// retryable marks an attempt's failure worth another attempt; after wraps
// how long the server asked to wait (0: not said).
type retryable struct {
	err   error
	after time.Duration
}

func (r *retryable) Error() string { return r.err.Error() }
func (r *retryable) Unwrap() error { return r.err }

// embedBatch makes one request, retried while it fails retryably and the
// deadline leaves room for the wait.
func (e *Embedder) embedBatch(ctx context.Context, cfg *settings, inputs []string) ([][]float32, error) {
	body, err := json.Marshal(embeddingsRequest{Model: cfg.model, Input: inputs, Dimensions: dimensionsSent(cfg)})
	if err != nil {
		return nil, fmt.Errorf("openai: encode request: %w", err)
	}
	for attempt := 0; ; attempt++ {
		vecs, err := e.post(ctx, cfg, body, len(inputs))
		var r *retryable
		if err == nil || !errors.As(err, &r) || attempt >= cfg.retries {
			if err != nil && attempt > 0 {
				err = fmt.Errorf("%w (after %d attempts)", err, attempt+1)
			}
			return vecs, err
		}
		wait := r.after
		if wait <= 0 {
			wait = backoff(cfg.backoff, attempt)
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return nil, fmt.Errorf("%w; the next attempt, in %s, would pass the call's deadline", err, wait.Round(time.Millisecond))
		}
		// A warning, so a rate-limited endpoint shows in the instance's
		// status, not only as slow calls; at most one a minute.
		if n, ok := e.retryLogDue(); ok {
			e.log.WarnContext(ctx, "embeddings request retried", "endpoint", cfg.endpoint, "attempt", attempt+2, "wait_ms", wait.Milliseconds(), "retries", n, "error", err.Error())
		}
		if err := e.sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("openai: waiting to retry %s: %w", cfg.endpoint, endpoint.ContextError(err))
		}
	}
}

// retryLogDue counts a retry and reports whether its warning is due (the
// first retry, or the first a minute after the last line), with the
// retries the line stands for: this one and those not logged since.
func (e *Embedder) retryLogDue() (int, bool) {
	e.retryMu.Lock()
	defer e.retryMu.Unlock()
	e.retriesSince++
	now := e.now()
	if !e.retryLoggedAt.IsZero() && now.Sub(e.retryLoggedAt) < retryLogEvery {
		return 0, false
	}
	n := e.retriesSince
	e.retryLoggedAt, e.retriesSince = now, 0
	return n, true
}

func dimensionsSent(cfg *settings) int {
	if cfg.sendDimensions {
		return cfg.info.Dimensions
	}
	return 0
}

// backoff is attempt's delay: base doubled per attempt up to MaxBackoff,
// of which a random part is waited (full jitter), so clients refused at
// once do not come back at once.
func backoff(base time.Duration, attempt int) time.Duration {
	d := MaxBackoff
	if attempt < 16 && base<<attempt < MaxBackoff {
		d = base << attempt
	}
	return d/2 + rand.N(d/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// post sends one request under the per-request timeout and decodes its
// answer of n vectors.
func (e *Embedder) post(parent context.Context, cfg *settings, body []byte, n int) ([][]float32, error) {
	ctx, cancel := context.WithTimeout(parent, cfg.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("openai: %v: %w", err, sdk.ErrInvalid)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if cfg.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+cfg.apiKey)
	}
	resp, err := e.client.Do(hreq)
	if err != nil {
		return nil, transportError(parent, cfg, err)
	}
	defer resp.Body.Close()
	limit := responseLimit(n, cfg.info.Dimensions)
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return nil, transportError(parent, cfg, err)
	}
	if len(data) > limit {
		return nil, fmt.Errorf("openai: the answer of %s is over %d bytes: %w", cfg.endpoint, limit, sdk.ErrUnavailable)
	}
	if resp.StatusCode/100 == 3 {
		return nil, redirectError(cfg, resp)
	}
	if resp.StatusCode/100 != 2 {
		return nil, statusError(cfg, resp, data)
	}
	vecs, err := decode(data, n, cfg.info.Dimensions)
	if err != nil {
		// The message quotes the answer, which may echo the key.
		return nil, fmt.Errorf("openai: %s: %s: %w", cfg.endpoint, endpoint.Redact(err.Error(), cfg.apiKey), sdk.ErrUnavailable)
	}
	return vecs, nil
}

// transportError classifies a request that got no answer: the end of the
// call's own context (parent) is final; the request's timeout or a lost
// connection is worth retrying.
func transportError(parent context.Context, cfg *settings, err error) error {
	if perr := parent.Err(); perr != nil {
		return fmt.Errorf("openai: %s: %w", cfg.endpoint, endpoint.ContextError(perr))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &retryable{err: fmt.Errorf("openai: %s gave no answer within %s: %w", cfg.endpoint, cfg.timeout, sdk.ErrUnavailable)}
	}
	// Redacted as an answer is: a TLS error quotes the names the
	// endpoint's certificate holds.
	return &retryable{err: fmt.Errorf("openai: %s: %s: %w", cfg.endpoint, endpoint.Redact(endpoint.TransportCause(err).Error(), cfg.apiKey), sdk.ErrUnavailable)}
}

// decode reads an embeddings answer: exactly one entry per input, each
// with an index (entries may come in any order) and dims values.
func decode(data []byte, n, dims int) ([][]float32, error) {
	var out embeddingsResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("malformed JSON answer (%s): %.200q", jsonProblem(err), data)
	}
	if out.Data == nil {
		return nil, fmt.Errorf("the answer has no data: %.200q", data)
	}
	entries := *out.Data
	if len(entries) != n {
		return nil, fmt.Errorf("the answer has %d embeddings for %d texts", len(entries), n)
	}
	vecs := make([][]float32, n)
	for k, d := range entries {
		switch {
		case d.Index == nil:
			return nil, fmt.Errorf("embedding %d of the answer has no index", k)
		case *d.Index < 0 || *d.Index >= n:
			return nil, fmt.Errorf("embedding %d of the answer has index %d, outside 0..%d", k, *d.Index, n-1)
		case vecs[*d.Index] != nil:
			return nil, fmt.Errorf("the answer has index %d twice", *d.Index)
		case len(d.Embedding) != dims:
			return nil, fmt.Errorf("the model answered %d dimensions, the config says %d (set dimensions to the model's vector length)", len(d.Embedding), dims)
		}
		vecs[*d.Index] = d.Embedding
	}
	return vecs, nil
}

// jsonProblem says what is wrong with an answer in the API's terms: the
// decoder's own words name the Go types it decodes into, which mean
// nothing to whoever reads the error in /v1/plugins or the log.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err.Error() // a syntax error, or one of this package's
	}
	want := "another kind of value"
	switch te.Type.Kind() {
	case reflect.Slice:
		want = "an array"
	case reflect.Struct:
		want = "an object"
	case reflect.Int:
		want = "a whole number"
	case reflect.Float32:
		want = "a number within single precision's range"
	}
	at := "the answer"
	if te.Field != "" {
		at = te.Field
	}
	return fmt.Sprintf("%s is %s, where %s belongs", at, te.Value, want)
}

// redirectError is a 3xx answer, which the plugin does not follow. It names
// where the endpoint points, by scheme and host only: the rest of the
// Location may carry anything.
func redirectError(cfg *settings, resp *http.Response) error {
	return fmt.Errorf("openai: %s answered HTTP %d, a redirect to %s, which is not followed (set base_url to where the endpoint is served): %w",
		cfg.endpoint, resp.StatusCode, endpoint.Redact(endpoint.RedirectTarget(resp), cfg.apiKey), sdk.ErrUnavailable)
}

// maxExcerpt bounds how much of an error page an error quotes.
const maxExcerpt = 200

// statusError classifies a non-2xx answer: overload and server faults are
// retried (then unavailable), a refused key is permission denied, a
// refused request invalid.
func statusError(cfg *settings, resp *http.Response, body []byte) error {
	msg := strings.TrimSpace(string(body))
	var e apiError
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	}
	// Gateways echo the key they refused ("Incorrect API key provided:
	// sk-..."); the host logs this message and shows it in its status.
	msg = endpoint.Redact(sdk.CutText(msg, maxExcerpt), cfg.apiKey)
	code, endpoint := resp.StatusCode, cfg.endpoint
	err := func(sentinel error) error {
		return fmt.Errorf("openai: %s answered HTTP %d: %s: %w", endpoint, code, msg, sentinel)
	}
	switch {
	case code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500:
		return &retryable{err: err(sdk.ErrUnavailable), after: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return err(sdk.ErrPermission)
	case code == http.StatusBadRequest || code == http.StatusRequestEntityTooLarge || code == http.StatusUnprocessableEntity:
		// What a server says of the texts it was sent.
		return err(sdk.ErrInvalid)
	default:
		// Any other answer (404 while a model is still being pulled, 409,
		// 424 from a gateway) says nothing of the texts: the endpoint is
		// not serving them.
		return err(sdk.ErrUnavailable)
	}
}

// retryAfter reads a Retry-After header, in seconds or an HTTP date; 0
// when absent or unreadable. It is capped at MaxBackoff: a server asking
// for minutes is down, and the caller's deadline decides.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	var d time.Duration
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs > 0 { // NaN is not
			d = time.Duration(min(secs, MaxBackoff.Seconds()) * float64(time.Second))
		}
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), MaxBackoff)
}
