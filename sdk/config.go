package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

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
