// Package pluginhost finds, verifies, starts and supervises memhost
// plugins for the host process.
//
// Trust flows one way: a manifest found in the plugin directory names an
// executable beside it and that executable's sha256; the executable must
// stay inside the directory, hash to the manifest's digest (checked again
// by go-plugin just before exec), and report through Info exactly the name,
// version, kinds and protocols the manifest promises. Any difference is a
// refusal, reported as one line naming the plugin, the file and the
// difference.
package pluginhost

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/memhost/memhost/sdk/host"
)

// ErrRefused marks a plugin the host will not run.
var ErrRefused = errors.New("plugin refused")

// Refusal is a refused manifest whose plugin name is known, so a config
// instance naming that plugin can be told why it is not there.
type Refusal struct {
	Plugin   string
	Manifest string // the manifest's path; "" when several claim the name
	Reason   string
}

func (r *Refusal) Error() string {
	if r.Manifest == "" {
		return fmt.Sprintf("plugin %s: refused: %s", r.Plugin, r.Reason)
	}
	return fmt.Sprintf("plugin %s (%s): refused: %s", r.Plugin, r.Manifest, r.Reason)
}

func (r *Refusal) Unwrap() error { return ErrRefused }

// refusal is a refused plugin whose message says "refused" once: it reads
// as ErrRefused without ending in "plugin refused" as well.
type refusal struct{ err error }

func refusedf(format string, args ...any) error { return &refusal{fmt.Errorf(format, args...)} }

func (r *refusal) Error() string   { return r.err.Error() }
func (r *refusal) Unwrap() []error { return []error{r.err, ErrRefused} }

// Entry is one discovered plugin: its manifest and resolved executable.
type Entry struct {
	Manifest     *host.Manifest
	ManifestPath string
	// Executable is the absolute, symlink-free path of the plugin binary
	// (of the script, for a script plugin).
	Executable string
	// Interpreted is set for a script plugin (manifest format 2).
	Interpreted *host.Interpreted
}

// Discover reads every *.plugin.json in dir. A missing or unreadable
// directory is an error; a bad manifest is refused on its own (one line
// each in refusals) without hiding the good ones. Two manifests claiming
// the same name are both refused.
func Discover(dir string) (entries []Entry, refusals []error, err error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("plugin directory %s: %w", dir, err)
	}
	info, err := os.Stat(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("plugin directory %s does not exist (build the plugins with `make build`, or set plugin_dir)", root)
		}
		return nil, nil, fmt.Errorf("plugin directory %s: %w", root, err)
	}
	if !info.IsDir() {
		return nil, nil, fmt.Errorf("plugin directory %s is not a directory", root)
	}
	// Any user who may add a file to it may plant a manifest, even with
	// the sticky bit; one who may rename an entry of a directory above it
	// may put another directory in its place.
	if info.Mode().Perm()&0o002 != 0 {
		return nil, nil, fmt.Errorf("plugin directory %s is writable by every user of the machine, who could plant or replace a plugin the host runs (chmod o-w %s)", root, root)
	}
	// The path as given and the one its links lead to: a directory above
	// either may be where someone swaps it.
	paths := []string{root}
	if real, err := filepath.EvalSymlinks(root); err == nil && real != root {
		paths = append(paths, real)
	}
	for _, p := range paths {
		for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
			if st, err := os.Stat(dir); err == nil && everyoneWrites(st) {
				return nil, nil, fmt.Errorf("plugin directory %s lies in %s, which every user of the machine may write, and so replace the plugin directory (chmod o-w %s, or set the sticky bit)", root, dir, dir)
			}
			if dir == filepath.Dir(dir) {
				break
			}
		}
	}
	names, err := filepath.Glob(filepath.Join(root, "*"+host.ManifestSuffix))
	if err != nil {
		return nil, nil, fmt.Errorf("plugin directory %s: %w", root, err)
	}
	sort.Strings(names)
	byName := map[string][]Entry{}
	for _, path := range names {
		e, err := loadEntry(root, path)
		if err != nil {
			refusals = append(refusals, err)
			continue
		}
		byName[e.Manifest.Name] = append(byName[e.Manifest.Name], e)
	}
	for _, name := range sortedKeys(byName) {
		es := byName[name]
		if len(es) > 1 {
			paths := make([]string, len(es))
			for i, e := range es {
				paths[i] = e.ManifestPath
			}
			refusals = append(refusals, &Refusal{Plugin: name, Reason: fmt.Sprintf("%d manifests claim this name (%s)", len(es), strings.Join(paths, ", "))})
			continue
		}
		entries = append(entries, es[0])
	}
	return entries, refusals, nil
}

func loadEntry(root, path string) (Entry, error) {
	refuse := func(format string, args ...any) error {
		return refusedf("plugin manifest %s: refused: %s", path, fmt.Sprintf(format, args...))
	}
	data, err := readManifest(path)
	if err != nil {
		return Entry{}, refuse("%v", err)
	}
	if st, err := os.Stat(path); err == nil && everyoneWrites(st) {
		return Entry{}, refuse("writable by every user of the machine (chmod o-w)")
	}
	m, err := host.ParseManifest(data)
	if err != nil {
		return Entry{}, refuse("%v", err)
	}
	exe, err := resolveInside(root, m.Executable)
	if err != nil {
		return Entry{}, &Refusal{Plugin: m.Name, Manifest: path, Reason: err.Error()}
	}
	in, err := interpretedInside(root, m)
	if err != nil {
		return Entry{}, &Refusal{Plugin: m.Name, Manifest: path, Reason: err.Error()}
	}
	return Entry{Manifest: m, ManifestPath: path, Executable: exe, Interpreted: in}, nil
}

// maxManifestBytes bounds a manifest file; real ones are a few hundred
// bytes, a config schema included.
const maxManifestBytes = 1 << 20

// readManifest reads a manifest file that must be a regular file of at
// most maxManifestBytes. The open does not block, so a FIFO named like a
// manifest is refused instead of holding discovery until a writer comes,
// and a device (a symlink to /dev/zero) is not read without end.
func readManifest(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, unwrapPath(err)
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
	if err != nil {
		return nil, unwrapPath(err)
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxManifestBytes)
	}
	return data, nil
}

// unwrapPath drops the path from a file error: the refusal names it.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// resolveInside resolves name inside root, following symlinks, and refuses
// anything that lands outside root or is not a regular executable file.
func resolveInside(root, name string) (string, error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, name))
	if err != nil {
		return "", fmt.Errorf("executable %s: %w", name, err)
	}
	rel, err := filepath.Rel(realRoot, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("executable %s resolves to %s, outside the plugin directory %s", name, real, realRoot)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("executable %s: %w", name, err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("executable %s is not an executable regular file", real)
	}
	if everyoneWrites(st) {
		return "", fmt.Errorf("executable %s is writable by every user of the machine, who could replace what the host runs (chmod o-w)", real)
	}
	return real, nil
}

// everyoneWrites reports a file or directory any user of the machine may
// write: a plugin there runs as the host whoever wrote it, and its
// manifest's checksum, in the same directory, proves nothing. A directory
// with the sticky bit (/tmp's) lets no one replace another's files.
func everyoneWrites(st fs.FileInfo) bool {
	if st.IsDir() && st.Mode()&fs.ModeSticky != 0 {
		return false
	}
	return st.Mode().Perm()&0o002 != 0
}

// FileSHA256 hashes a file.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
