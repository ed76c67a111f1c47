package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk/strictjson"
)

// DecodeConfig decodes a plugin's Configure payload into v strictly: it
// must be one JSON object with known keys only (a misspelled key must never
// be silently ignored) and nothing after it. An empty payload leaves v as
// it is, so callers preset defaults in v; the host always sends an object
// ("{}" when the deployment gives none). Errors wrap ErrInvalid.
func DecodeConfig(raw json.RawMessage, v any) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return nil
	}
	if trimmed[0] != '{' {
		return fmt.Errorf("config must be a JSON object, got %.40q: %w", trimmed, ErrInvalid)
	}
	if err := strictjson.Decode(trimmed, v); err != nil {
		var e *strictjson.Error
		if errors.As(err, &e) && e.Path != "" {
			return invalid(e.Path, e.Problem)
		}
		return invalid("config", err.Error())
	}
	return nil
}

// envName is what a variable name in a plugin config must look like.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// EnvNameShown is how an error names the environment variable a config
// names: the name when it looks like one (capitals, digits and _, short),
// else a phrase that stands for it.
// A secret pasted there by mistake is mostly letters and digits too, and
// the error of its unset "variable" reaches logs.
func EnvNameShown(name string) string {
	looksLikeName := len(name) <= 48 && (len(name) <= 16 || strings.Contains(name, "_")) &&
		strings.IndexFunc(name, func(r rune) bool { return !(r == '_' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') }) < 0
	if looksLikeName {
		return name
	}
	return "a variable whose name is not repeated (it looks more like a secret than a name)"
}

// SecretFromEnv reads a secret (an API key) that a plugin's config names
// by its environment variable, at config key field: "" for an empty name
// (no secret), else the variable's trimmed value. A name that is no
// variable name is refused without echoing it (a key pasted into the
// config by mistake would be logged), and an unset or blank variable is
// refused naming it, as is a value holding a control character (a line
// break inside a pasted secret): no HTTP header carries one, so every
// request would fail before it was sent, each retried as if the endpoint
// were down. Errors wrap ErrInvalid. lookup nil is os.LookupEnv.
func SecretFromEnv(field, name string, lookup func(string) (string, bool)) (string, error) {
	if name == "" {
		return "", nil
	}
	if !envName.MatchString(name) {
		return "", invalid(field, "must name an environment variable (letters, digits and _), not hold the secret itself")
	}
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, ok := lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return "", invalid(field, fmt.Sprintf("names %s, which is not set in the plugin's environment", EnvNameShown(name)))
	}
	v = strings.TrimSpace(v)
	if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
		return "", invalid(field, fmt.Sprintf("names %s, whose value holds a control character (a line break, say), which no HTTP header carries", EnvNameShown(name)))
	}
	return v, nil
}

// LedgerBounds are the config keys that bound a provider's injection
// ledger (see LedgerWriter). A provider's Config embeds it, and its config
// schema declares LedgerBoundsSchema's properties; zero takes the
// defaults.
type LedgerBounds struct {
	RetentionHours int   `json:"ledger_retention_hours"`
	MaxRows        int64 `json:"ledger_max_rows"`
}

// maxDurationHours is the most hours a time.Duration holds.
const maxDurationHours = math.MaxInt64 / int64(time.Hour)

// Limits answers the retention and the row bound, defaults filled in; a
// value out of range is an error wrapping ErrInvalid that names its key.
func (b LedgerBounds) Limits() (retention time.Duration, maxRows int64, err error) {
	retention, maxRows = DefaultLedgerRetention, DefaultLedgerMaxRows
	switch {
	case b.RetentionHours < 0 || int64(b.RetentionHours) > maxDurationHours:
		return 0, 0, invalid("ledger_retention_hours", fmt.Sprintf("is %d, must be from 1 to %d", b.RetentionHours, maxDurationHours))
	case b.RetentionHours > 0:
		retention = time.Duration(b.RetentionHours) * time.Hour
	}
	switch {
	case b.MaxRows < 0:
		return 0, 0, invalid("ledger_max_rows", fmt.Sprintf("is %d, must be positive", b.MaxRows))
	case b.MaxRows > 0:
		maxRows = b.MaxRows
	}
	return retention, maxRows, nil
}

// LedgerBoundsSchema is LedgerBounds' keys as JSON Schema properties, for
// a provider's config schema to list among its own.
const LedgerBoundsSchema = `"ledger_retention_hours": {
      "type": "integer",
      "description": "Injection ledger rows older than this leave it, oldest first, as new rows are written.",
      "default": 720,
      "minimum": 1,
      "maximum": 2562047
    },
    "ledger_max_rows": {
      "type": "integer",
      "description": "The injection ledger keeps at most this many rows, dropping the oldest as new rows are written; where several processes write one ledger, the lowest bound among them holds.",
      "default": 10000000,
      "minimum": 1
    }`
