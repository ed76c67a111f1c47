package pluginhost

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// interpretedInside resolves a script plugin's tree inside root, like its
// executable: a symlink may not lead the tree out of the plugin directory.
// It answers nil for a native plugin.
func interpretedInside(root string, m *host.Manifest) (*host.Interpreted, error) {
	if m.Interpreter == nil {
		return nil, nil
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	tree, err := filepath.EvalSymlinks(filepath.Join(root, m.Tree))
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", m.Tree, err)
	}
	if rel, err := filepath.Rel(realRoot, tree); err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("tree %s resolves to %s, outside the plugin directory %s", m.Tree, tree, realRoot)
	}
	if st, err := os.Stat(tree); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("tree %s is not a directory", tree)
	} else if everyoneWrites(st) {
		return nil, fmt.Errorf("tree %s is writable by every user of the machine, who could replace what the host runs (chmod o-w)", tree)
	}
	return m.Interpreted(realRoot), nil
}

// ScriptPlugin says how to write a script plugin's manifest: its entry
// script inside a tree that is a directory of the plugin directory, and
// the interpreter with its arguments.
type ScriptPlugin struct {
	Script      string
	Interpreter string
	Args        []string
}

// WriteScriptManifest starts a script plugin once, the way the host will
// (tree and interpreter checked), asks its Info and writes the format 2
// manifest into the plugin directory, the tree's parent.
func WriteScriptManifest(ctx context.Context, sp ScriptPlugin, logger hclog.Logger, force bool) (Written, error) {
	script, err := filepath.Abs(sp.Script)
	if err != nil {
		return Written{}, err
	}
	tree := filepath.Dir(script)
	dir := filepath.Dir(tree)
	if !filepath.IsAbs(sp.Interpreter) {
		return Written{}, fmt.Errorf("plugin %s: interpreter %q must be an absolute path", script, sp.Interpreter)
	}
	treeSum, err := host.TreeDigest(tree)
	if err != nil {
		return Written{}, fmt.Errorf("plugin %s: %w", script, err)
	}
	scriptSum, err := FileSHA256(script)
	if err != nil {
		return Written{}, fmt.Errorf("plugin %s: %w", script, err)
	}
	interpSum, err := FileSHA256(sp.Interpreter)
	if err != nil {
		return Written{}, fmt.Errorf("plugin %s: interpreter: %w", script, err)
	}
	m := &host.Manifest{
		Format: host.InterpretedFormat, Executable: filepath.Base(tree) + "/" + filepath.Base(script), SHA256: scriptSum,
		Interpreter: &host.Interpreter{Path: sp.Interpreter, SHA256: interpSum, Args: sp.Args},
		Tree:        filepath.Base(tree), TreeSHA256: hex.EncodeToString(treeSum),
	}
	info, err := infoOf(ctx, host.LaunchOptions{Name: filepath.Base(tree), Path: script, SHA256: m.Checksum(),
		Logger: logger, Dir: os.TempDir(), Interpreted: m.Interpreted(dir)})
	if err != nil {
		return Written{}, err
	}
	full := host.ManifestFor(info, m.Executable, scriptSum)
	full.Format, full.Interpreter, full.Tree, full.TreeSHA256 = m.Format, m.Interpreter, m.Tree, m.TreeSHA256
	if err := full.Validate(); err != nil {
		return Written{}, fmt.Errorf("plugin %s: %w", script, err)
	}
	return writeManifestFile(filepath.Join(dir, info.Name+host.ManifestSuffix), full, force)
}

// Written is what writing a manifest did.
type Written struct {
	Path     string
	Manifest *host.Manifest
	// Replaced is set when a manifest was already at Path; Previous is
	// the executable it named ("" when it could not be read).
	Replaced bool
	Previous string
}

// errManifestTaken refuses to write over a manifest that names another
// executable: the plugin names its manifest by the name it reports, so a
// binary reporting another plugin's name would take that plugin's place
// (its instances, data and config) at the next start.
var errManifestTaken = fmt.Errorf("the manifest belongs to another executable: %w", sdk.ErrConflict)

// writeManifestFile writes m at path through a temporary file. A manifest
// already at path is replaced when it names m's executable, or when force
// is set; otherwise the write is refused.
func writeManifestFile(path string, m *host.Manifest, force bool) (Written, error) {
	w := Written{Path: path, Manifest: m}
	switch old, err := os.ReadFile(path); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Written{}, fmt.Errorf("write manifest %s: %w", path, err)
	default:
		w.Replaced = true
		prev, perr := host.ParseManifest(old)
		if perr == nil {
			w.Previous = prev.Executable
		}
		switch {
		case force:
		case perr != nil:
			return Written{}, fmt.Errorf("write manifest %s for %s: a manifest that cannot be read is there (%v); pass --force to replace it: %w",
				path, m.Executable, perr, errManifestTaken)
		case prev.Executable != m.Executable:
			return Written{}, fmt.Errorf("write manifest %s: %s reports the name %q, and that manifest names another executable, %s; rename one plugin, or pass --force to replace it: %w",
				path, m.Executable, m.Name, prev.Executable, errManifestTaken)
		}
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Written{}, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return Written{}, fmt.Errorf("write manifest %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return Written{}, fmt.Errorf("write manifest %s: %w", path, err)
	}
	return w, nil
}
