package host

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/internal/wire"
	"github.com/memhost/memhost/sdk/strictjson"
)

// ManifestFormat is the manifest format version this host reads and
// writes. A manifest without one is format 1 (they predate the field).
// Within one format, fields and kinds are only ever added: a host accepts
// a manifest with fields or kinds it does not know, with a warning, and
// refuses only what it cannot serve. A new format version is a break, and
// a host refuses a format it does not know.
const ManifestFormat = 1

// ErrManifestFormat is wrapped by the error for a manifest whose format
// version this host does not read, or none of whose kinds it knows.
var ErrManifestFormat = errors.New("unknown manifest format")

// formatError is that error: one line saying what to do, wrapping
// ErrManifestFormat and sdk.ErrInvalid without repeating their text.
type formatError struct{ msg string }

func (e *formatError) Error() string   { return e.msg }
func (e *formatError) Unwrap() []error { return []error{ErrManifestFormat, sdk.ErrInvalid} }

// ManifestSuffix ends every plugin manifest file name. The host scans its
// plugin directory for files with this suffix.
const ManifestSuffix = ".plugin.json"

// Manifest is the plugin manifest: a JSON file beside the plugin
// executable that the host trusts only after checking the executable's
// sha256 and the plugin's own Info against it.
type Manifest struct {
	Format       int              `json:"format"`
	Name         string           `json:"name"`
	Version      string           `json:"version"`
	Kinds        []sdk.PluginKind `json:"kinds"`
	Protocols    []int            `json:"protocols"`
	Executable   string           `json:"executable"`
	SHA256       string           `json:"sha256"`
	ConfigSchema json.RawMessage  `json:"config_schema,omitempty"`
	// Interpreter and Tree are format 2's, for a plugin that is a script
	// (interpreted.go).
	Interpreter *Interpreter `json:"interpreter,omitempty"`
	Tree        string       `json:"tree,omitempty"`
	TreeSHA256  string       `json:"tree_sha256,omitempty"`
	// Warnings say what this host ignored: fields and kinds newer than it.
	// The host logs them; they are not part of the file.
	Warnings []string `json:"-"`
}

// ParseManifest decodes and validates a manifest. A field or kind this host
// does not know is a warning (Manifest.Warnings): a newer memhost wrote
// it. A format version this host does not read is an error wrapping
// ErrManifestFormat, and so is a manifest none of whose kinds it knows.
func ParseManifest(data []byte) (*Manifest, error) {
	// The format is read first: another format's fields may mean anything.
	var head struct {
		Format *int `json:"format"`
	}
	if _, err := strictjson.DecodeTolerant(data, &head); err != nil {
		return nil, fmt.Errorf("manifest: %v: %w", err, sdk.ErrInvalid)
	}
	if head.Format != nil && *head.Format != ManifestFormat && *head.Format != InterpretedFormat {
		return nil, &formatError{fmt.Sprintf("manifest: format %d is not one this memhost reads (it reads formats %d and %d); upgrade memhost or rebuild the plugin's manifest",
			*head.Format, ManifestFormat, InterpretedFormat)}
	}
	var m Manifest
	unknown, err := strictjson.DecodeTolerant(data, &m)
	if err != nil {
		return nil, fmt.Errorf("manifest: %v: %w", err, sdk.ErrInvalid)
	}
	if m.Format == 0 {
		m.Format = ManifestFormat
	}
	for _, k := range unknown {
		m.Warnings = append(m.Warnings, fmt.Sprintf("manifest: ignoring field %q, unknown to this memhost", k))
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	for _, k := range m.Kinds {
		if !k.Known() {
			m.Warnings = append(m.Warnings, fmt.Sprintf("manifest: kind %q is unknown to this memhost; it serves the plugin's other kinds", k))
		}
	}
	return &m, nil
}

// KnownKinds are the manifest's kinds this host can serve.
func (m *Manifest) KnownKinds() []sdk.PluginKind {
	var out []sdk.PluginKind
	for _, k := range m.Kinds {
		if k.Known() {
			out = append(out, k)
		}
	}
	return out
}

// Validate checks the manifest's own fields.
func (m *Manifest) Validate() error {
	bad := func(field, problem string) error {
		return fmt.Errorf("manifest: %s %s: %w", field, problem, sdk.ErrInvalid)
	}
	if err := wire.ValidateToken(m.Name, 64); err != nil {
		return bad("name", err.Error())
	}
	if !wire.IsSemver(m.Version) {
		return bad("version", fmt.Sprintf("%q is not a semantic version like 1.2.3", m.Version))
	}
	if len(m.Kinds) == 0 {
		return bad("kinds", "is empty")
	}
	if len(m.KnownKinds()) == 0 {
		return &formatError{fmt.Sprintf("manifest: kinds %q: none is a kind this memhost serves (it serves %v)", m.Kinds, sdk.Kinds())}
	}
	if len(m.Protocols) == 0 {
		return bad("protocols", "is empty")
	}
	// The file names and paths reach the operator's log and terminal in
	// refusals, some as they stand: a line break would forge a log line,
	// an escape sequence drive the terminal.
	for field, v := range m.names() {
		if !utf8.ValidString(v) || strings.ContainsFunc(v, breaksLine) {
			return bad(field, "holds a control character or invalid UTF-8")
		}
	}
	if err := m.validateInterpreted(); err != nil {
		return err
	}
	if m.Tree == "" && (m.Executable == "" || m.Executable != filepath.Base(m.Executable) || strings.HasPrefix(m.Executable, ".") || strings.ContainsAny(m.Executable, `/\`)) {
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

// names yields the manifest's file names and paths by field.
func (m *Manifest) names() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		if !yield("executable", m.Executable) || !yield("tree", m.Tree) || m.Interpreter == nil {
			return
		}
		if !yield("interpreter.path", m.Interpreter.Path) {
			return
		}
		for i, a := range m.Interpreter.Args {
			if !yield(fmt.Sprintf("interpreter.args[%d]", i), a) {
				return
			}
		}
	}
}

// Checksum is the decoded sha256.
func (m *Manifest) Checksum() []byte {
	sum, _ := hex.DecodeString(m.SHA256)
	return sum
}

// Mismatch compares the manifest with what the running plugin reported and
// describes every difference; "" means they agree. What the plugin
// reported is bounded as its log lines are: an Info may be as large as a
// message, and the refusal is logged and shown at every restart.
func (m *Manifest) Mismatch(info sdk.Info) string {
	var diffs []string
	if info.Name != m.Name {
		diffs = append(diffs, fmt.Sprintf("name: manifest %q, plugin %s", m.Name, clean(fmt.Sprintf("%q", info.Name))))
	}
	if info.Version != m.Version {
		diffs = append(diffs, fmt.Sprintf("version: manifest %q, plugin %s", m.Version, clean(fmt.Sprintf("%q", info.Version))))
	}
	if !sameSet(m.Kinds, info.Kinds) {
		diffs = append(diffs, fmt.Sprintf("kinds: manifest %q, plugin %s", m.Kinds, clean(fmt.Sprintf("%q", info.Kinds))))
	}
	if !sameSet(m.Protocols, info.Protocols) {
		diffs = append(diffs, fmt.Sprintf("protocols: manifest %v, plugin %s", m.Protocols, clean(fmt.Sprint(info.Protocols))))
	}
	return strings.Join(diffs, "; ")
}

// ManifestFor builds the manifest for a plugin from its Info, executable
// name and digest (the `memhost plugins manifest` command uses it).
func ManifestFor(info sdk.Info, executable, sha256hex string) *Manifest {
	return &Manifest{
		Format: ManifestFormat, Name: info.Name, Version: info.Version, Kinds: info.Kinds, Protocols: info.Protocols,
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

// CheckInfo verifies what a plugin reported about itself: a safe name, a
// semantic version, protocol 1 and at least one kind.
func CheckInfo(info sdk.Info) error {
	if err := wire.ValidateToken(info.Name, 64); err != nil {
		return fmt.Errorf("Info().Name %v", err)
	}
	if !wire.IsSemver(info.Version) {
		return fmt.Errorf("Info().Version %s is not a semantic version like 1.2.3", clean(fmt.Sprintf("%q", info.Version)))
	}
	if !slices.Contains(info.Protocols, wire.ProtocolVersion) {
		return fmt.Errorf("Info().Protocols %s does not include protocol %d, the one this host speaks", clean(fmt.Sprint(info.Protocols)), wire.ProtocolVersion)
	}
	if len(info.Kinds) == 0 {
		return fmt.Errorf("Info().Kinds is empty")
	}
	return nil
}

// IsSemver reports whether v looks like MAJOR.MINOR.PATCH with an optional
// pre-release or build suffix.
func IsSemver(v string) bool { return wire.IsSemver(v) }
