package llm

import (
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
	DefaultTimeout   = 25 * time.Second
	MaxTimeout       = 10 * time.Minute
	DefaultMaxBytes  = 8192
	MinMaxBytes      = 256
	MaxMaxBytes      = 1 << 20
	DefaultMaxTokens = 1024
	DefaultMaxRows   = 400  // manifest rows in one selection prompt
	MaxMaxRows       = 4000 // the most the host's sweep sends in one Select
)

const configSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["base_url", "model"],
  "properties": {
    "base_url":    {"type": "string", "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#]", "description": "OpenAI-compatible API root, e.g. https://api.openai.com/v1; the plugin POSTs to <base_url>/chat/completions"},
    "model":       {"type": "string", "pattern": "\\S"},
    "api_key_env": {"type": "string", "pattern": "^([A-Za-z_][A-Za-z0-9_]*)?$", "description": "environment variable holding the API key (sent as a bearer token); none for a local server"},
    "timeout_ms":  {"type": "integer", "minimum": 1, "maximum": 600000, "default": 25000, "description": "bound of one model call; the host bounds a whole compaction request at 30 s"},
    "max_tokens":  {"type": "integer", "minimum": 16, "default": 1024},
    "temperature": {"type": "number", "minimum": 0, "maximum": 2, "default": 0},
    "max_bytes":   {"type": "integer", "minimum": 256, "maximum": 1048576, "default": 8192, "description": "byte cap of a summary (the host's cap applies too)"},
    "max_rows":    {"type": "integer", "minimum": 1, "maximum": 4000, "default": 400, "description": "selector: manifest rows put into one prompt"}
  }
}`

// Config is the plugin's configuration as the deployment writes it.
type Config struct {
	BaseURL     string   `json:"base_url"`
	Model       string   `json:"model"`
	APIKeyEnv   string   `json:"api_key_env"`
	TimeoutMS   int      `json:"timeout_ms"`
	MaxTokens   int      `json:"max_tokens"`
	Temperature *float64 `json:"temperature"`
	MaxBytes    int      `json:"max_bytes"`
	MaxRows     int      `json:"max_rows"`
}

// settings is a validated Config, ready to use.
type settings struct {
	endpoint    string
	model       string
	apiKey      string
	timeout     time.Duration
	maxTokens   int
	temperature float64
	maxBytes    int
	maxRows     int
}

// parseConfig validates raw; lookupEnv reads the API key variable (the key
// itself never appears in an error).
func parseConfig(raw json.RawMessage, lookupEnv func(string) (string, bool)) (settings, error) {
	c := Config{TimeoutMS: int(DefaultTimeout / time.Millisecond), MaxTokens: DefaultMaxTokens, MaxBytes: DefaultMaxBytes, MaxRows: DefaultMaxRows}
	if err := sdk.DecodeConfig(raw, &c); err != nil {
		return settings{}, fmt.Errorf("llm config: %w", err)
	}
	bad := func(format string, args ...any) (settings, error) {
		return settings{}, fmt.Errorf("llm config: "+format+": %w", append(args, sdk.ErrInvalid)...)
	}
	u, err := url.Parse(c.BaseURL)
	switch {
	case c.BaseURL == "":
		return bad("base_url is required (for example https://api.openai.com/v1)")
	case err != nil:
		// Not quoted, nor is the parser's message, which quotes it: the
		// value may carry a key, which the host would log.
		return bad("base_url does not parse as an http or https URL")
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return bad("base_url %q is not an http or https URL", endpoint.Shown(c.BaseURL))
	case u.User != nil:
		// Errors name the endpoint: a password in it would be logged.
		return bad("base_url must not carry credentials; name the key's variable in api_key_env")
	case u.RawQuery != "" || u.Fragment != "":
		return bad("base_url %q must not carry a query or fragment", endpoint.Shown(c.BaseURL))
	case strings.TrimSpace(c.Model) == "":
		return bad("model is required")
	case c.TimeoutMS < 1 || time.Duration(c.TimeoutMS)*time.Millisecond > MaxTimeout:
		return bad("timeout_ms %d is outside 1..%d", c.TimeoutMS, MaxTimeout.Milliseconds())
	case c.MaxTokens < 16:
		return bad("max_tokens %d is below 16", c.MaxTokens)
	case c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > 2):
		return bad("temperature %v is outside 0..2", *c.Temperature)
	case c.MaxBytes < MinMaxBytes || c.MaxBytes > MaxMaxBytes:
		return bad("max_bytes %d is outside %d..%d", c.MaxBytes, MinMaxBytes, MaxMaxBytes)
	case c.MaxRows < 1 || c.MaxRows > MaxMaxRows:
		return bad("max_rows %d is outside 1..%d", c.MaxRows, MaxMaxRows)
	}
	s := settings{
		endpoint: strings.TrimRight(c.BaseURL, "/") + "/chat/completions",
		model:    c.Model, timeout: time.Duration(c.TimeoutMS) * time.Millisecond,
		maxTokens: c.MaxTokens, maxBytes: c.MaxBytes, maxRows: c.MaxRows,
	}
	if c.Temperature != nil {
		s.temperature = *c.Temperature
	}
	key, err := sdk.SecretFromEnv("api_key_env", c.APIKeyEnv, lookupEnv)
	if err != nil {
		return settings{}, fmt.Errorf("llm config: %w", err)
	}
	s.apiKey = key
	return s, nil
}
