package openai

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/endpoint"
)

// Config bounds and defaults.
const (
	DefaultTimeout       = 30 * time.Second
	MaxTimeout           = 10 * time.Minute
	DefaultRequestBatch  = 64
	DefaultMaxInputBytes = 8192
	DefaultRetries       = 4
	MaxRetries           = 10
	DefaultParallel      = 4
	MaxParallel          = 16
	// DefaultBackoff is the first retry's delay before jitter; each retry
	// doubles it up to MaxBackoff.
	DefaultBackoff = 250 * time.Millisecond
	MaxBackoff     = 20 * time.Second
)

const configSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["base_url", "model", "dimensions"],
  "properties": {
    "base_url":           {"type": "string", "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#]", "description": "OpenAI-compatible API root, e.g. https://api.openai.com/v1; the plugin POSTs to <base_url>/embeddings"},
    "model":              {"type": "string", "pattern": "\\S", "description": "model name sent to the endpoint"},
    "dimensions":         {"type": "integer", "minimum": 1, "maximum": 8192, "description": "vector length the model answers; any other length is an error"},
    "send_dimensions":    {"type": "boolean", "default": false, "description": "send dimensions in the request, for models that shorten their vectors on request (text-embedding-3-*)"},
    "model_id":           {"type": "string", "description": "the id stored with each vector (default: model, dimensions and prefixes); vectors of another id are re-embedded"},
    "api_key_env":        {"type": "string", "pattern": "^([A-Za-z_][A-Za-z0-9_]*)?$", "description": "environment variable holding the API key (sent as a bearer token); none for a local server"},
    "query_prefix":       {"type": "string", "description": "put before every query text (\"search_query: \" for nomic-embed, \"query: \" for e5)"},
    "document_prefix":    {"type": "string", "description": "put before every document text"},
    "request_batch":      {"type": "integer", "minimum": 1, "maximum": 1000, "default": 64, "description": "texts per HTTP request; a larger Embed call is split"},
    "parallel":           {"type": "integer", "minimum": 1, "maximum": 16, "default": 4, "description": "HTTP requests of one Embed call in flight at once"},
    "max_input_bytes":    {"type": "integer", "minimum": 1, "maximum": 65536, "default": 8192, "description": "longest input the endpoint takes, in bytes, the prefix included (the host cuts longer texts)"},
    "timeout_ms":         {"type": "integer", "minimum": 1, "maximum": 600000, "default": 30000, "description": "bound of one HTTP request; the host's call deadline bounds the whole call"},
    "max_retries":        {"type": "integer", "minimum": 0, "maximum": 10, "default": 4, "description": "retries of a request answered 429, 408 or 5xx, or lost on the way"},
    "retry_base_ms":      {"type": "integer", "minimum": 1, "maximum": 20000, "default": 250, "description": "first retry's delay; it doubles per retry, with jitter, up to 20 s; a Retry-After answer wins"},
    "deterministic":      {"type": "boolean", "default": false, "description": "declare that the endpoint answers one text with one vector every time"}
  }
}`

// Config is the plugin's configuration as the deployment writes it.
type Config struct {
	BaseURL        string `json:"base_url"`
	Model          string `json:"model"`
	Dimensions     int    `json:"dimensions"`
	SendDimensions bool   `json:"send_dimensions"`
	ModelID        string `json:"model_id"`
	APIKeyEnv      string `json:"api_key_env"`
	QueryPrefix    string `json:"query_prefix"`
	DocumentPrefix string `json:"document_prefix"`
	RequestBatch   int    `json:"request_batch"`
	Parallel       int    `json:"parallel"`
	MaxInputBytes  int    `json:"max_input_bytes"`
	TimeoutMS      int    `json:"timeout_ms"`
	MaxRetries     int    `json:"max_retries"`
	RetryBaseMS    int    `json:"retry_base_ms"`
	Deterministic  bool   `json:"deterministic"`
}

// settings is a validated Config, ready to use.
type settings struct {
	endpoint       string
	model          string
	sendDimensions bool
	apiKey         string
	prefix         map[sdk.EmbedPurpose]string
	requestBatch   int
	parallel       int
	timeout        time.Duration
	retries        int
	backoff        time.Duration
	info           sdk.EmbedderInfo
}

// parseConfig validates raw; lookupEnv reads the API key variable (the key
// itself never appears in an error).
func parseConfig(raw json.RawMessage, lookupEnv func(string) (string, bool)) (settings, error) {
	c := Config{
		RequestBatch: DefaultRequestBatch, Parallel: DefaultParallel, MaxInputBytes: DefaultMaxInputBytes,
		TimeoutMS: int(DefaultTimeout / time.Millisecond), MaxRetries: DefaultRetries, RetryBaseMS: int(DefaultBackoff / time.Millisecond),
	}
	if err := sdk.DecodeConfig(raw, &c); err != nil {
		return settings{}, fmt.Errorf("openai config: %w", err)
	}
	bad := func(field, format string, args ...any) (settings, error) {
		return settings{}, fmt.Errorf("openai config: %w", &sdk.FieldError{Field: field, Problem: fmt.Sprintf(format, args...), Err: sdk.ErrInvalid})
	}
	u, err := url.Parse(c.BaseURL)
	switch {
	case c.BaseURL == "":
		return bad("base_url", "is required (for example https://api.openai.com/v1)")
	case err != nil:
		// Not quoted, nor is the parser's message, which quotes it: the
		// value may carry a key, which the host would log.
		return bad("base_url", "does not parse as an http or https URL")
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return bad("base_url", "%q is not an http or https URL", endpoint.Shown(c.BaseURL))
	case u.User != nil:
		// Errors name the endpoint: a password in it would be logged.
		return bad("base_url", "must not carry credentials; name the key's variable in api_key_env")
	case u.RawQuery != "" || u.Fragment != "":
		return bad("base_url", "%q must not carry a query or fragment", endpoint.Shown(c.BaseURL))
	case strings.TrimSpace(c.Model) == "":
		return bad("model", "is required")
	case c.Dimensions < 1 || c.Dimensions > sdk.MaxEmbedDimensions:
		return bad("dimensions", "%d is outside 1..%d (set it to the model's vector length)", c.Dimensions, sdk.MaxEmbedDimensions)
	case c.RequestBatch < 1 || c.RequestBatch > sdk.MaxEmbedBatch:
		return bad("request_batch", "%d is outside 1..%d", c.RequestBatch, sdk.MaxEmbedBatch)
	case c.Parallel < 1 || c.Parallel > MaxParallel:
		return bad("parallel", "%d is outside 1..%d", c.Parallel, MaxParallel)
	case c.MaxInputBytes < 1 || c.MaxInputBytes > sdk.MaxEmbedInputBytes:
		return bad("max_input_bytes", "%d is outside 1..%d", c.MaxInputBytes, sdk.MaxEmbedInputBytes)
	case c.TimeoutMS < 1 || time.Duration(c.TimeoutMS)*time.Millisecond > MaxTimeout:
		return bad("timeout_ms", "%d is outside 1..%d", c.TimeoutMS, MaxTimeout.Milliseconds())
	case c.MaxRetries < 0 || c.MaxRetries > MaxRetries:
		return bad("max_retries", "%d is outside 0..%d", c.MaxRetries, MaxRetries)
	case c.RetryBaseMS < 1 || time.Duration(c.RetryBaseMS)*time.Millisecond > MaxBackoff:
		return bad("retry_base_ms", "%d is outside 1..%d", c.RetryBaseMS, MaxBackoff.Milliseconds())
	}
	// The endpoint's limit holds the prefix too: the host cuts a text to
	// what is left of it.
	prefix := max(len(c.QueryPrefix), len(c.DocumentPrefix))
	if prefix >= c.MaxInputBytes {
		return bad("max_input_bytes", "%d leaves no room for text after the %d-byte prefix", c.MaxInputBytes, prefix)
	}
	s := settings{
		endpoint: strings.TrimRight(c.BaseURL, "/") + "/embeddings", model: c.Model, sendDimensions: c.SendDimensions,
		prefix:       map[sdk.EmbedPurpose]string{sdk.EmbedQuery: c.QueryPrefix, sdk.EmbedDocument: c.DocumentPrefix},
		requestBatch: c.RequestBatch, parallel: c.Parallel,
		timeout: time.Duration(c.TimeoutMS) * time.Millisecond, retries: c.MaxRetries,
		backoff: time.Duration(c.RetryBaseMS) * time.Millisecond,
		info: sdk.EmbedderInfo{
			Model: c.ModelID, Dimensions: c.Dimensions, MaxBatch: sdk.MaxEmbedBatch,
			MaxInputBytes: c.MaxInputBytes - prefix, Deterministic: c.Deterministic,
		},
	}
	if s.info.Model == "" {
		s.info.Model = modelID(c)
	}
	if err := s.info.Validate(); err != nil {
		field := "model_id"
		if c.ModelID == "" {
			field = "model"
		}
		return bad(field, "makes a model id the host refuses: %v", err)
	}
	key, err := sdk.SecretFromEnv("api_key_env", c.APIKeyEnv, lookupEnv)
	if err != nil {
		return settings{}, fmt.Errorf("openai config: %w", err)
	}
	s.apiKey = key
	return s, nil
}

// modelID names what makes the vectors: the model, their length and the
// prefixes put before texts, so changing any of them marks every stored
// vector stale. The endpoint is left out: one model served elsewhere
// answers the same vectors.
func modelID(c Config) string {
	id := fmt.Sprintf("%s/%d", strings.TrimSpace(c.Model), c.Dimensions)
	if c.QueryPrefix != "" || c.DocumentPrefix != "" {
		sum := sha256.Sum256([]byte(c.QueryPrefix + "\x00" + c.DocumentPrefix))
		id += "/p" + hex.EncodeToString(sum[:4])
	}
	return id
}
