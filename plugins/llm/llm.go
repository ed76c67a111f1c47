// Package llm is memhost's LLM plugin: it asks any OpenAI-compatible chat
// completions endpoint (OpenAI, a vLLM or llama.cpp server, a gateway) to
// fold evicted messages into the rolling summary (compactor) and to pick
// the records to inject for a turn (selector, see select.go). Empty,
// failed or malformed output is an error, so the host never advances its
// watermark over a summary that was not written.
package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/classify"
	"github.com/memhost/memhost/sdk/endpoint"
)

// Version is the plugin's version, reported by Info and the manifest.
const Version = "0.1.0"

// maxResponseBytes bounds what the plugin reads of an answer.
const maxResponseBytes = 4 << 20

// cacheSize is how many recent artifacts are kept by idempotency key: a
// host retry of a call that succeeded here (its answer lost on the way
// back) is answered without paying for the model again.
const cacheSize = 64

// Compactor is the LLM compactor plugin.
type Compactor struct {
	client    *http.Client
	lookupEnv func(string) (string, bool)

	mu    sync.RWMutex
	cfg   *settings
	cache map[string]sdk.Message
	order []string
}

// New answers an unconfigured compactor. Its client follows no redirect:
// following one would send the conversation to a host the operator never
// configured, and Go keeps the Authorization header across a change of
// port or from https to http.
func New() *Compactor {
	return &Compactor{client: &http.Client{CheckRedirect: endpoint.NoRedirects}, cache: map[string]sdk.Message{}}
}

func (c *Compactor) Info() sdk.Info {
	return sdk.Info{
		Name: "llm", Version: Version, Kinds: []sdk.PluginKind{sdk.KindCompactor, sdk.KindSelector},
		Protocols: []int{sdk.ProtocolVersion}, ConfigSchema: json.RawMessage(configSchema),
	}
}

func (c *Compactor) Configure(_ context.Context, raw json.RawMessage) error {
	s, err := parseConfig(raw, c.lookupEnv)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.cfg = &s
	c.mu.Unlock()
	return nil
}

// ErrNotConfigured answers a Compact before Configure.
var ErrNotConfigured = fmt.Errorf("llm compactor is not configured: %w", sdk.ErrUnavailable)

// errNoContent: the answer held no choice with message content.
var errNoContent = errors.New("no choice with message content")

// ErrEmptyOutput: the model answered no summary text.
var ErrEmptyOutput = errors.New("the model answered an empty summary")

// ErrCutShort: the model stopped before it finished the summary (at its
// max_tokens, or by a content filter): the rest of what it would have
// kept is lost, so the summary is refused rather than stored.
var ErrCutShort = errors.New("the model stopped before the summary was finished")

func (c *Compactor) Compact(ctx context.Context, req sdk.CompactRequest) (sdk.Message, error) {
	if err := ctx.Err(); err != nil {
		return sdk.Message{}, endpoint.ContextError(err)
	}
	c.mu.RLock()
	cfg := c.cfg
	c.mu.RUnlock()
	if cfg == nil {
		return sdk.Message{}, ErrNotConfigured
	}
	limit := cfg.maxBytes
	if req.MaxBytes > 0 && req.MaxBytes < limit {
		limit = req.MaxBytes
	}
	cacheKey := ""
	if req.IdempotencyKey != "" {
		carry := ""
		if req.CarryOver != nil {
			carry = req.CarryOver.Content
		}
		cacheKey = fmt.Sprintf("%s\x00%d\x00%s", req.IdempotencyKey, limit, carry)
		if art, ok := c.cached(cacheKey); ok {
			return art, nil
		}
	}
	text, err := c.complete(ctx, cfg, req, limit)
	if err != nil {
		return sdk.Message{}, err
	}
	art := sdk.Message{Role: "system", Content: keepStanding(text, req, limit)}
	if cacheKey != "" {
		c.remember(cacheKey, art)
	}
	return art, nil
}

// The wire shapes of the chat completions API, as far as the plugin uses
// them.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []chatMessage `json:"messages"`
	MaxTokens   int           `json:"max_tokens,omitempty"`
	Temperature float64       `json:"temperature"`
}

type chatResponse struct {
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"`
}

type apiError struct {
	Error struct {
		Message string `json:"message"`
	} `json:"error"`
}

func (c *Compactor) complete(ctx context.Context, cfg *settings, req sdk.CompactRequest, limit int) (string, error) {
	text, finish, err := c.chatFinish(ctx, cfg, Prompt(req, limit), cfg.maxTokens, req.IdempotencyKey)
	if err != nil {
		return "", err
	}
	// A summary the model was stopped in the middle of is not the summary:
	// stored, it would advance the host's watermark over messages whose
	// account was cut off, and a rolling summary loses its older part for
	// good.
	switch finish {
	case "length":
		return "", cutShort{fmt.Sprintf("llm: %s stopped at max_tokens (%d) before the summary was finished; raise max_tokens", cfg.endpoint, cfg.maxTokens), sdk.ErrTooLarge}
	case "content_filter":
		return "", cutShort{fmt.Sprintf("llm: %s withheld part of the summary (finish_reason %q)", cfg.endpoint, finish), sdk.ErrInvalid}
	}
	return text, nil
}

// cutShort is an answer the model was stopped in: ErrCutShort, with the
// code the host answers.
type cutShort struct {
	msg  string
	code error
}

func (e cutShort) Error() string   { return e.msg }
func (e cutShort) Unwrap() []error { return []error{ErrCutShort, e.code} }

// chat sends one chat completions request and answers the first choice's
// trimmed content; idempotencyKey, when set, is sent as a header.
func (c *Compactor) chat(ctx context.Context, cfg *settings, messages []chatMessage, maxTokens int, idempotencyKey string) (string, error) {
	text, _, err := c.chatFinish(ctx, cfg, messages, maxTokens, idempotencyKey)
	return text, err
}

// chatFinish is chat, answering the choice's finish_reason too.
func (c *Compactor) chatFinish(ctx context.Context, cfg *settings, messages []chatMessage, maxTokens int, idempotencyKey string) (string, string, error) {
	body, err := json.Marshal(chatRequest{
		Model: cfg.model, Messages: messages, MaxTokens: maxTokens, Temperature: cfg.temperature,
	})
	if err != nil {
		return "", "", fmt.Errorf("llm: encode request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.endpoint, bytes.NewReader(body))
	if err != nil {
		return "", "", fmt.Errorf("llm: %v: %w", err, sdk.ErrInvalid)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if cfg.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+cfg.apiKey)
	}
	if idempotencyKey != "" {
		hreq.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := c.client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return "", "", fmt.Errorf("llm: %s gave no answer within %s: %w", cfg.endpoint, cfg.timeout, endpoint.ContextError(ctx.Err()))
		}
		// Redacted as the answer is: a TLS error quotes the names the
		// endpoint's certificate holds.
		return "", "", fmt.Errorf("llm: %s: %s: %w", cfg.endpoint, endpoint.Redact(endpoint.TransportCause(err).Error(), cfg.apiKey), sdk.ErrUnavailable)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return "", "", fmt.Errorf("llm: reading the answer of %s: %w", cfg.endpoint, endpoint.ContextError(ctx.Err()))
		}
		return "", "", fmt.Errorf("llm: reading the answer of %s: %v: %w", cfg.endpoint, err, sdk.ErrUnavailable)
	}
	if len(data) > maxResponseBytes {
		return "", "", fmt.Errorf("llm: the answer of %s is over %d bytes: %w", cfg.endpoint, maxResponseBytes, sdk.ErrUnavailable)
	}
	if resp.StatusCode/100 == 3 {
		return "", "", redirectError(cfg, resp)
	}
	if resp.StatusCode/100 != 2 {
		return "", "", statusError(cfg, resp.StatusCode, data)
	}
	// Errors quote the answer, and the host logs them and answers them to
	// the client: an endpoint that echoes the request's Authorization
	// header must not leak the key. The excerpt is redacted as it is
	// shown, so a key the answer escapes or cuts is caught too.
	shown := endpoint.Redact(fmt.Sprintf("%.200q", data), cfg.apiKey)
	var out chatResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return "", "", fmt.Errorf("llm: %s answered malformed JSON: %s: %w", cfg.endpoint, shown, sdk.ErrUnavailable)
	}
	if len(out.Choices) == 0 && len(out.Error) > 0 && string(out.Error) != "null" {
		// A failure answered with 200, as gateways relay an upstream's:
		// the endpoint's to retry, not an empty answer worth a repair.
		return "", "", fmt.Errorf("llm: %s answered an error: %s: %w", cfg.endpoint, errorMessage(cfg, data), sdk.ErrUnavailable)
	}
	if len(out.Choices) == 0 || out.Choices[0].Message.Content == nil {
		return "", "", fmt.Errorf("llm: %s answered %s: %w", cfg.endpoint, shown, errNoContent)
	}
	text := strings.TrimSpace(*out.Choices[0].Message.Content)
	if !visible(text) {
		return "", "", fmt.Errorf("llm: %s (finish_reason %q): %w", cfg.endpoint, out.Choices[0].FinishReason, ErrEmptyOutput)
	}
	if !utf8.ValidString(text) {
		return "", "", fmt.Errorf("llm: %s answered invalid UTF-8", cfg.endpoint)
	}
	return text, out.Choices[0].FinishReason, nil
}

// redirectError is a 3xx answer, which the plugin does not follow. It names
// where the endpoint points, by scheme and host only: the rest of the
// Location may carry anything.
func redirectError(cfg *settings, resp *http.Response) error {
	// The endpoint writes the Location as it likes: the key echoed in it
	// is redacted too.
	return fmt.Errorf("llm: %s answered HTTP %d, a redirect to %s, which is not followed (set base_url to where the endpoint is served): %w",
		cfg.endpoint, resp.StatusCode, endpoint.Redact(endpoint.RedirectTarget(resp), cfg.apiKey), sdk.ErrUnavailable)
}

// statusError classifies a non-2xx answer: overload and server faults are
// "try again" (unavailable), a refused key is permission denied, anything
// else a broken request.
func statusError(cfg *settings, code int, body []byte) error {
	msg := errorMessage(cfg, body)
	var sentinel error
	switch {
	case code == http.StatusTooManyRequests || code >= 500:
		sentinel = sdk.ErrUnavailable
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		sentinel = sdk.ErrPermission
	case code == http.StatusRequestTimeout:
		sentinel = sdk.ErrDeadline
	default:
		sentinel = sdk.ErrInvalid
	}
	return fmt.Errorf("llm: %s answered HTTP %d: %s: %w", cfg.endpoint, code, msg, sentinel)
}

// errorMessage answers what an error body says: its error's message (an
// object's, or the error itself when a string), else the body, redacted
// once decoded and cut: gateways echo the key they refused, escaped in
// JSON or cut short.
func errorMessage(cfg *settings, body []byte) string {
	msg := strings.TrimSpace(string(body))
	var e apiError
	var plain struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	} else if json.Unmarshal(body, &plain) == nil && plain.Error != "" {
		msg = plain.Error
	}
	return endpoint.Redact(sdk.CutText(msg, 200), cfg.apiKey)
}

// visible reports whether s holds a character that shows: a summary of
// only spaces, zero-width or format characters and lone combining marks
// says nothing.
func visible(s string) bool {
	for _, r := range s {
		if unicode.IsGraphic(r) && !unicode.IsSpace(r) && !unicode.In(r, unicode.Cf, unicode.Mn, unicode.Me) {
			return true
		}
	}
	return false
}

// fit cuts text to limit bytes at the last line break that fits (else at
// a UTF-8 boundary): a model overshooting the cap loses its last lines,
// never the whole summary.
// standingHeading heads the standing instructions the plugin writes at
// the top of every summary: the user's and the operator's rules, read
// from the messages by sdk/classify, never the model's words.
const standingHeading = "Standing instructions (kept from earlier):"

// keepStanding writes, ahead of the model's summary, every instruction
// still standing: those of the previous summary's own block and those
// the removed messages set (sdk/classify), less the ones they withdraw.
// A model that summarised a rule away would otherwise have the agent
// forget it. Only the block the plugin wrote carries a rule forward: a
// line of the model's text, however it reads, is the model's (whose
// input an attacker may steer), and is given no authority. The block
// wins the byte budget over the model's text, and ends at a blank line.
func keepStanding(text string, req sdk.CompactRequest, limit int) string {
	var said []classify.Said
	if req.CarryOver != nil {
		for _, l := range standingBlock(req.CarryOver.Content) {
			said = append(said, classify.Said{Role: "system", Text: l})
		}
	}
	for _, m := range req.Evicted {
		said = append(said, classify.Said{Role: m.Role, Text: m.Content})
	}
	text = disown(text)
	var keep []string
	for _, in := range classify.Standing(said) {
		keep = append(keep, "- "+in.Text())
	}
	if len(keep) == 0 {
		return fit(text, limit)
	}
	head := fit(standingHeading+"\n"+strings.Join(keep, "\n"), limit)
	if room := limit - len(head) - 2; room > 0 && strings.TrimSpace(text) != "" {
		if rest := fit(text, room); rest != "" {
			return head + "\n\n" + rest
		}
	}
	return head
}

// standingBlock answers the instructions of the block keepStanding wrote
// at the top of summary: the lines after its heading, up to a blank line.
func standingBlock(summary string) []string {
	lines := strings.Split(strings.TrimLeft(summary, " \t\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != standingHeading {
		return nil
	}
	var out []string
	for _, l := range lines[1:] {
		rule, ok := strings.CutPrefix(strings.TrimSpace(l), "- ")
		if !ok {
			break
		}
		out = append(out, rule)
	}
	return out
}

// disown keeps the model's text from opening with the plugin's heading,
// which would make its lines read as the plugin's block next time.
func disown(text string) string {
	trimmed := strings.TrimLeft(text, " \t\n")
	if rest, ok := strings.CutPrefix(trimmed, standingHeading); ok {
		return "Standing instructions (as the summary states them):" + rest
	}
	return text
}

func fit(text string, limit int) string {
	if len(text) <= limit {
		return text
	}
	cut := len(sdk.CutText(text, limit))
	if i := strings.LastIndexByte(text[:cut], '\n'); i > limit/2 {
		cut = i
	}
	return strings.TrimRight(text[:cut], " \n")
}

func (c *Compactor) cached(key string) (sdk.Message, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	m, ok := c.cache[key]
	return m, ok
}

func (c *Compactor) remember(key string, art sdk.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cache[key]; ok {
		return
	}
	if len(c.order) >= cacheSize {
		delete(c.cache, c.order[0])
		c.order = c.order[1:]
	}
	c.cache[key] = art
	c.order = append(c.order, key)
}
