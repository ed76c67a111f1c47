package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

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

// SecretFromEnv reads a secret (an API key) that a plugin's config names
// by its environment variable, at config key field: "" for an empty name
// (no secret), else the variable's trimmed value. A name that is no
// variable name is refused without echoing it (a key pasted into the
// config by mistake would be logged), and an unset or blank variable is
// refused naming it. Errors wrap ErrInvalid. lookup nil is os.LookupEnv.
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
		return "", invalid(field, fmt.Sprintf("names %s, which is not set in the plugin's environment", name))
	}
	return strings.TrimSpace(v), nil
}
