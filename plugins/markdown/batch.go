package markdown

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/memhost/memhost/sdk"
)

// A batch of several files lands whole or not at all, a crash included.
// Its temp files are written and synced first; then its intent, a file in
// the root naming each temp and the record file it becomes, is written
// and synced; only then are the temps renamed into place. The next start
// finishes the renames of any intent it finds (finishBatches), so a crash
// between two renames leaves the whole batch, never part of it. An intent
// without its end line was cut short before any rename: it is dropped,
// and its temps with the rest (firstSweep).

const (
	batchPrefix = ".memhost-batch-"
	intentEnd   = "end"
)

// writeIntent writes and syncs the intent of renaming tmps[i] to
// ws[i].path and answers its path.
func (s *store) writeIntent(tmps []string, ws []*pendingWrite) (string, error) {
	var b bytes.Buffer
	for i, w := range ws {
		from, err1 := filepath.Rel(s.root, tmps[i])
		to, err2 := filepath.Rel(s.root, w.path)
		if err := errors.Join(err1, err2); err != nil {
			return "", fmt.Errorf("markdown: batch intent: %w", err)
		}
		fmt.Fprintf(&b, "%s\t%s\n", filepath.ToSlash(from), filepath.ToSlash(to))
	}
	b.WriteString(intentEnd + "\n")
	f, err := os.CreateTemp(s.root, batchPrefix+"*")
	if err != nil {
		return "", fmt.Errorf("markdown: batch intent: %w", err)
	}
	path := f.Name()
	_, err = f.Write(b.Bytes())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(s.root)
	}
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("markdown: batch intent: %w", err)
	}
	return path, nil
}

// finishBatches finishes the batches a crash interrupted, before the
// first sweep reads the tree (and clears temp files): every temp a whole
// intent names is renamed into place.
func (s *store) finishBatches() {
	entries, err := os.ReadDir(s.root)
	if err != nil {
		return // the sweep reports an unreadable root
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), batchPrefix) || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(s.root, e.Name())
		n, err := s.finishBatch(path)
		switch {
		case err != nil:
			s.log.Warn("cannot finish a batch of writes a crash interrupted; its records may be partly written", "intent", path, "error", err.Error())
		case n > 0:
			s.log.Info("finished a batch of writes a crash interrupted", "intent", path, "files", n)
		}
		if err == nil {
			os.Remove(path)
		}
	}
}

// finishBatch renames the temps the intent at file names that are still
// there and answers how many; an intent cut short renames nothing.
func (s *store) finishBatch(file string) (int, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) == 0 || lines[len(lines)-1] != intentEnd {
		return 0, nil
	}
	type move struct{ from, to string }
	var moves []move
	for _, line := range lines[:len(lines)-1] {
		// A temp file lies beside the record it becomes (writeTemp), in a
		// directory of the tree: never the root, never through a link.
		from, to, ok := strings.Cut(line, "\t")
		dir := path.Dir(to)
		if !ok || path.Dir(from) != dir || dir == "." || !strings.HasPrefix(path.Base(from), tempPrefix) || !strings.HasSuffix(to, recordExt) {
			return 0, fmt.Errorf("line %q names no temp file beside its record", line)
		}
		af, err1 := abs(s.root, from)
		at, err2 := abs(s.root, to)
		if err := errors.Join(err1, err2, checkPlainDir(s.root, dir)); err != nil {
			return 0, err
		}
		moves = append(moves, move{af, at})
	}
	n := 0
	dirs := map[string]bool{}
	for _, m := range moves {
		if fi, err := os.Lstat(m.from); err == nil && !fi.Mode().IsRegular() {
			return n, fmt.Errorf("%s is not a plain file; refusing to rename it into place: %w", m.from, sdk.ErrPermission)
		}
		if err := os.Rename(m.from, m.to); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // renamed before the crash
			}
			return n, err
		}
		n++
		dirs[filepath.Dir(m.to)] = true
	}
	for d := range dirs {
		if err := syncDir(d); err != nil {
			return n, err
		}
	}
	return n, nil
}
