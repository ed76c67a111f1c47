package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%v: %w", err, ErrInvalid)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after the JSON object: %w", ErrInvalid)
	}
	return nil
}
