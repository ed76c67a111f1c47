package sdk

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// ManifestSuffix ends every plugin manifest file name. The host scans its
// plugin directory for files with this suffix.
const ManifestSuffix = ".plugin.json"

// Manifest is the plugin manifest: a JSON file beside the plugin
// executable that the host trusts only after checking the executable's
// sha256 and the plugin's own Info against it.
type Manifest struct {
	Name         string          `json:"name"`
	Version      string          `json:"version"`
	Kinds        []PluginKind    `json:"kinds"`
	Protocols    []int           `json:"protocols"`
	Executable   string          `json:"executable"`
	SHA256       string          `json:"sha256"`
	ConfigSchema json.RawMessage `json:"config_schema,omitempty"`
}

// ParseManifest decodes and validates a manifest. Unknown fields are an
// error: a misspelled field must never be silently ignored.
func ParseManifest(data []byte) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest: %v: %w", err, ErrInvalid)
	}
	if dec.More() {
		return nil, fmt.Errorf("manifest: trailing data after the JSON object: %w", ErrInvalid)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks the manifest's own fields.
func (m *Manifest) Validate() error {
	bad := func(field, problem string) error {
		return fmt.Errorf("manifest: %s %s: %w", field, problem, ErrInvalid)
	}
	if err := validateToken(m.Name, 64); err != nil {
		return bad("name", err.Error())
	}
	if !IsSemver(m.Version) {
		return bad("version", fmt.Sprintf("%q is not a semantic version like 1.2.3", m.Version))
	}
	if len(m.Kinds) == 0 {
		return bad("kinds", "is empty")
	}
	for _, k := range m.Kinds {
		if !slices.Contains(PluginKinds, k) {
			return bad("kinds", fmt.Sprintf("names unknown kind %q", k))
		}
	}
	if len(m.Protocols) == 0 {
		return bad("protocols", "is empty")
	}
	if m.Executable == "" || m.Executable != filepath.Base(m.Executable) || strings.HasPrefix(m.Executable, ".") || strings.ContainsAny(m.Executable, `/\`) {
		return bad("executable", fmt.Sprintf("%q must be a plain file name inside the plugin directory", m.Executable))
	}
	if sum, err := hex.DecodeString(m.SHA256); err != nil || len(sum) != 32 {
		return bad("sha256", "must be 64 hex digits")
	}
	if len(m.ConfigSchema) > 0 && !json.Valid(m.ConfigSchema) {
		return bad("config_schema", "is not valid JSON")
	}
	return nil
}

// Checksum is the decoded sha256.
func (m *Manifest) Checksum() []byte {
	sum, _ := hex.DecodeString(m.SHA256)
	return sum
}

// Mismatch compares the manifest with what the running plugin reported and
// describes every difference; "" means they agree.
func (m *Manifest) Mismatch(info Info) string {
	var diffs []string
	if info.Name != m.Name {
		diffs = append(diffs, fmt.Sprintf("name: manifest %q, plugin %q", m.Name, info.Name))
	}
	if info.Version != m.Version {
		diffs = append(diffs, fmt.Sprintf("version: manifest %q, plugin %q", m.Version, info.Version))
	}
	if !sameSet(m.Kinds, info.Kinds) {
		diffs = append(diffs, fmt.Sprintf("kinds: manifest %v, plugin %v", m.Kinds, info.Kinds))
	}
	if !sameSet(m.Protocols, info.Protocols) {
		diffs = append(diffs, fmt.Sprintf("protocols: manifest %v, plugin %v", m.Protocols, info.Protocols))
	}
	return strings.Join(diffs, "; ")
}

// ManifestFor builds the manifest for a plugin from its Info, executable
// name and digest (the `memhost plugins manifest` command uses it).
func ManifestFor(info Info, executable, sha256hex string) *Manifest {
	return &Manifest{
		Name: info.Name, Version: info.Version, Kinds: info.Kinds, Protocols: info.Protocols,
		Executable: executable, SHA256: sha256hex, ConfigSchema: info.ConfigSchema,
	}
}

func sameSet[T comparable](a, b []T) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}
