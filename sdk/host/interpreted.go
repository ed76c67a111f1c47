package host

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/memhost/memhost/sdk"
)

// InterpretedFormat is the manifest format of a plugin that is a script:
// format 1 plus an interpreter and a script tree. It is a format of its
// own so that a host too old to check the tree and pin the interpreter
// refuses the manifest instead of running the script unchecked.
const InterpretedFormat = 2

// Interpreter runs a script plugin: the host executes Path (absolute, no
// search path) with Args, then the script's path. Path is pinned by its
// sha256 like a plugin executable.
type Interpreter struct {
	Path   string   `json:"path"`
	SHA256 string   `json:"sha256"`
	Args   []string `json:"args,omitempty"`
}

// Bounds of a script tree, so hashing one at every start stays cheap and a
// manifest cannot point the host at a whole disk.
const (
	maxTreeFiles = 10000
	maxTreeBytes = 256 << 20
	maxInterpArg = 32
)

// validateInterpreted checks format 2's fields: all of them or none, and
// only in format 2. The executable (the script) must lie inside the tree.
func (m *Manifest) validateInterpreted() error {
	bad := func(field, problem string) error {
		return fmt.Errorf("manifest: %s %s: %w", field, problem, sdk.ErrInvalid)
	}
	set := m.Interpreter != nil || m.Tree != "" || m.TreeSHA256 != ""
	if !set {
		if m.Format == InterpretedFormat {
			return bad("interpreter", "is missing: a format 2 manifest is a script plugin's")
		}
		return nil
	}
	if m.Format != InterpretedFormat {
		return bad("interpreter", fmt.Sprintf("and tree need manifest format %d", InterpretedFormat))
	}
	in := m.Interpreter
	switch {
	case in == nil:
		return bad("interpreter", "is missing")
	case !filepath.IsAbs(in.Path) || filepath.Clean(in.Path) != in.Path:
		return bad("interpreter.path", fmt.Sprintf("%q must be an absolute, clean path (no search path is used)", in.Path))
	case !isHexSHA256(in.SHA256):
		return bad("interpreter.sha256", "must be 64 hex digits")
	case len(in.Args) > maxInterpArg:
		return bad("interpreter.args", fmt.Sprintf("has %d arguments, the limit is %d", len(in.Args), maxInterpArg))
	}
	for i, a := range in.Args {
		if a == "" || strings.IndexByte(a, 0) >= 0 {
			return bad(fmt.Sprintf("interpreter.args[%d]", i), "must be non-empty and hold no NUL byte")
		}
	}
	if m.Tree == "" || m.Tree != filepath.Base(m.Tree) || strings.HasPrefix(m.Tree, ".") || strings.ContainsAny(m.Tree, `/\`) {
		return bad("tree", fmt.Sprintf("%q must be a plain directory name inside the plugin directory", m.Tree))
	}
	if !isHexSHA256(m.TreeSHA256) {
		return bad("tree_sha256", "must be 64 hex digits")
	}
	rel, ok := strings.CutPrefix(m.Executable, m.Tree+"/")
	if !ok || rel == "" || path.Clean(rel) != rel || strings.HasPrefix(rel, ".") || strings.Contains(rel, "/.") || strings.Contains(rel, `\`) {
		return bad("executable", fmt.Sprintf("%q must be a file inside the tree %q, like %q", m.Executable, m.Tree, m.Tree+"/main.py"))
	}
	return nil
}

func isHexSHA256(s string) bool {
	sum, err := hex.DecodeString(s)
	return err == nil && len(sum) == sha256.Size
}

// Interpreted answers how to launch m's plugin when it is a script, with
// the tree found in pluginDir; nil for a native executable.
func (m *Manifest) Interpreted(pluginDir string) *Interpreted {
	if m.Interpreter == nil {
		return nil
	}
	isum, _ := hex.DecodeString(m.Interpreter.SHA256)
	tsum, _ := hex.DecodeString(m.TreeSHA256)
	return &Interpreted{Path: m.Interpreter.Path, SHA256: isum, Args: m.Interpreter.Args,
		Tree: filepath.Join(pluginDir, m.Tree), TreeSHA256: tsum}
}

// Interpreted is how Launch runs a script plugin: it checks the whole
// script tree and the interpreter before the start, executes the
// interpreter with Args and LaunchOptions.Path (the script, inside Tree),
// and checks the tree and the interpreter again once the plugin answered
// the handshake, so a file changed while the plugin started is refused.
type Interpreted struct {
	Path   string
	SHA256 []byte
	Args   []string
	// Tree is the directory of every file the plugin runs; TreeSHA256 is
	// its TreeDigest.
	Tree       string
	TreeSHA256 []byte
}

// errTreeChanged is why a launch is refused when the script tree changed
// between its check and the handshake.
var errTreeChanged = refuse("script tree changed while the plugin started (an interpreter writing bytecode caches into it? run Python with -B)")

// TreeDigest hashes a script tree: every entry under dir in lexical order,
// by its slash-separated path, whether it is a directory, an executable
// file or a file, and a file's contents. Symbolic links and special files
// are refused: what the interpreter reads must be what was hashed.
func TreeDigest(dir string) ([]byte, error) {
	h := sha256.New()
	var files int
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if files++; files > maxTreeFiles {
			return fmt.Errorf("holds more than %d entries", maxTreeFiles)
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("%s is a symbolic link or special file; a script tree holds directories and regular files only", rel)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		// The interpreter reads the files again by path after the check:
		// one that any user may write (or put in a directory any user may
		// write) could be swapped in between. A sticky directory too:
		// anyone may still add a module the interpreter finds before the
		// standard library's.
		if fi.Mode().Perm()&0o002 != 0 {
			return fmt.Errorf("%s is writable by every user of the machine (chmod -R o-w the tree)", rel)
		}
		if d.IsDir() {
			fmt.Fprintf(h, "d %s\x00", strconv.Quote(rel))
			return nil
		}
		if total += fi.Size(); total > maxTreeBytes {
			return fmt.Errorf("is over %d bytes", maxTreeBytes)
		}
		kind := "f"
		if fi.Mode().Perm()&0o111 != 0 {
			kind = "x"
		}
		fmt.Fprintf(h, "%s %s %d\x00", kind, strconv.Quote(rel), fi.Size())
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		// Exactly the size stated, so a file growing meanwhile cannot
		// shift the next entry's bytes.
		if n, err := io.Copy(h, io.LimitReader(f, fi.Size())); err != nil || n != fi.Size() {
			if err == nil {
				err = fmt.Errorf("%s changed while it was hashed", rel)
			}
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("script tree %s: %w", dir, err)
	}
	return h.Sum(nil), nil
}

// checkTree verifies the script tree against its digest.
func (in *Interpreted) checkTree() error {
	sum, err := TreeDigest(in.Tree)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("start failed: %w: %w", err, sdk.ErrUnavailable)
		}
		return refuse("refused: %w", err)
	}
	if !bytes.Equal(sum, in.TreeSHA256) {
		return refuse("refused: script tree %s sha256 does not match manifest tree_sha256 %x (a file was added, removed or changed since the manifest was written; if the change is yours, write it again with memhost plugins manifest --interpreter)", in.Tree, in.TreeSHA256)
	}
	return nil
}

// prepareInterpreter checks the tree and the interpreter and answers what
// to execute and its arguments. The interpreter stays open (s.interp) for
// the check after the start.
func (s *starting) prepareInterpreter() (string, []string, error) {
	in := s.opts.Interpreted
	rel, err := filepath.Rel(in.Tree, s.opts.Path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", nil, refuse("refused: script %s is outside its tree %s", s.opts.Path, in.Tree)
	}
	if err := in.checkTree(); err != nil {
		return "", nil, err
	}
	if len(in.SHA256) != sha256.Size {
		return "", nil, fmt.Errorf("no sha256 to verify the interpreter against: %w", sdk.ErrInvalid)
	}
	vf, err := s.verifier().check(in.Path, in.SHA256)
	if err != nil {
		return "", nil, fmt.Errorf("interpreter %s: %w", in.Path, interpreterError(err))
	}
	s.interp = vf
	target, byPath := vf.execTarget()
	s.interpByPath = byPath
	args := append([]string{in.Path}, in.Args...)
	return target, append(args, s.opts.Path), nil
}

// interpreterError says which file a refusal is about: the check's own
// message names the plugin's executable.
func interpreterError(err error) error {
	if errors.Is(err, sdk.ErrPermission) && !errors.Is(err, errChanged) {
		return refuse("refused: sha256 does not match manifest interpreter.sha256 (the interpreter was upgraded or replaced; if the change is yours, write the manifest again with memhost plugins manifest --interpreter)")
	}
	return err
}

// interpretedUnchanged reports the after-start check's refusal, nil when
// the interpreter and the tree are still what was checked.
func (s *starting) interpretedUnchanged() error {
	if s.interp == nil {
		return nil
	}
	if !s.interp.unchanged(s.interpByPath) {
		s.verifier().forget(s.interp.path)
		return errChanged
	}
	if err := s.opts.Interpreted.checkTree(); err != nil {
		return errTreeChanged
	}
	return nil
}

// closeExec closes the files the launch verified and kept open.
func (s *starting) closeExec() {
	if s.exe != nil {
		s.exe.f.Close()
	}
	if s.interp != nil {
		s.interp.f.Close()
	}
}
