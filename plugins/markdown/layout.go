package markdown

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/memhost/memhost/sdk"
)

// On disk a record lives at
//
//	<root>/<realm>/identity/<id>/<record id>.md
//	<root>/<realm>/mob/<name>/<record id>.md
//	<root>/<realm>/operator/<name>/<record id>.md
//	<root>/<realm>/realm/<record id>.md
//
// Realm, scope names and record ids are all safe tokens (letters, digits,
// '-', '_', '.', never a leading '.'), so no component can climb out of
// the root or hide as a dot file; every path is still checked to lie
// inside the root before it is used. Names starting with '.' (editor swap
// files, our own temp files, .git) are never records.

const (
	recordExt  = ".md"
	tempPrefix = ".memhost-tmp-"
	// lockName is the lock file in the root that keeps a second instance
	// off it (lock_unix.go).
	lockName = ".memhost-lock"
	// caseProbeName is the file whose upper-case name tells whether the
	// root's file system folds case (foldsCase).
	caseProbeName = ".memhost-case-probe"
	dirPerm       = 0o700 // memory is private to the deployment's user
	filePerm      = 0o600
	// maxFileBytes bounds what is read of a record file: the largest
	// valid body plus generous front matter.
	maxFileBytes = sdk.MaxBodyBytes + 16<<10
)

// fileKey names one record file.
type fileKey struct {
	realm string
	scope sdk.Scope
	id    string
}

// scopeDir is scope's directory inside its realm, '/'-separated.
func scopeDir(scope sdk.Scope) (string, error) {
	class, name, err := scope.Parse()
	if err != nil {
		return "", err
	}
	if class == sdk.ScopeRealm {
		return string(sdk.ScopeRealm), nil
	}
	return string(class) + "/" + name, nil
}

// rel is the file's path relative to the root, '/'-separated. The key
// must be valid (checkKey).
func (k fileKey) rel() string {
	d, _ := scopeDir(k.scope)
	return k.realm + "/" + d + "/" + k.id + recordExt
}

func (k fileKey) dirRel() string {
	d, _ := scopeDir(k.scope)
	return k.realm + "/" + d
}

func checkKey(k fileKey) error {
	if err := sdk.ValidateRealm(k.realm); err != nil {
		return err
	}
	if err := k.scope.Validate(); err != nil {
		return err
	}
	return sdk.ValidateID(k.id)
}

// abs turns a root-relative path into an absolute one, refusing anything
// that would land outside the root.
func abs(root, rel string) (string, error) {
	p := filepath.Join(root, filepath.FromSlash(rel))
	r, err := filepath.Rel(root, p)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) || filepath.IsAbs(r) {
		return "", fmt.Errorf("markdown: path %q escapes the root: %w", rel, sdk.ErrPermission)
	}
	return p, nil
}

// ensureDir creates root/rel one component at a time, syncing each new
// directory's parent so the directory survives a crash. It refuses to go
// through a symlink or a non-directory: a link planted inside the root
// must not redirect writes outside it.
func ensureDir(root, rel string) error {
	cur := root
	for _, part := range strings.Split(rel, "/") {
		parent := cur
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(cur, dirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("markdown: create %s: %w", cur, sdk.FileProblem(err))
			}
			if err := syncDir(parent); err != nil {
				return fmt.Errorf("markdown: sync %s: %w", parent, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("markdown: %w", err)
		}
		if !fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("markdown: %s is not a plain directory; refusing to write through it: %w", cur, sdk.ErrPermission)
		}
	}
	return nil
}

// Names that differ only in case are one name on some file systems (the
// defaults of macOS and Windows): there realm "MD" would land in realm
// "md"'s directory and identity:Alice in identity:alice's, and the next
// scan would read the files back as the other realm's records, or as no
// records at all (their scope does not match the directory). On such a
// root a write refuses a realm or scope whose directory an entry of the
// same parent matches but for case.

// foldsCase reports whether the file system under root takes names that
// differ only in case as one.
func foldsCase(root string) (bool, error) {
	probe := filepath.Join(root, caseProbeName)
	// A probe left behind by a crash, or a link put in its place, goes
	// first: the probe is made new (O_EXCL), never opened through a link,
	// which would truncate the file it leads to.
	if err := os.Remove(probe); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("markdown: remove %s: %w", probe, err)
	}
	f, err := os.OpenFile(probe, os.O_RDWR|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return false, fmt.Errorf("markdown: create %s: %w", probe, err)
	}
	f.Close()
	defer os.Remove(probe)
	fi, err := os.Lstat(probe)
	if err != nil {
		return false, fmt.Errorf("markdown: %w", err)
	}
	upper, err := os.Lstat(filepath.Join(root, strings.ToUpper(caseProbeName)))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("markdown: %w", err)
	}
	return os.SameFile(fi, upper), nil
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// checkPlainDir refuses root/rel unless each of its components is a plain
// directory, as ensureDir does, without creating any: a link swapped in
// for a directory the index knows must not redirect a removal outside
// the root. A component that is gone is not refused (nothing is there to
// remove).
func checkPlainDir(root, rel string) error {
	cur := root
	for _, part := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("markdown: %w", err)
		}
		if !fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("markdown: %s is not a plain directory; refusing to remove through it: %w", cur, sdk.ErrPermission)
		}
	}
	return nil
}

// behindLink reports whether a directory on the way to k's file is a link
// or not a directory. The lister never enters such a directory, so its
// files are gone from the tree; a later look at one path must not reach
// them either (Lstat and O_NOFOLLOW guard only the last component).
func behindLink(root string, k fileKey) bool {
	return errors.Is(checkPlainDir(root, k.dirRel()), sdk.ErrPermission)
}

// writeAtomic replaces path with data: a temp file in the same directory,
// written and fsynced, then renamed over path. A reader sees the old file
// or the new one, never a torn one. The caller syncs the directory.
func writeAtomic(path string, data []byte) (fileStamp, error) {
	tmp, st, err := writeTemp(path, data)
	if err != nil {
		return st, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fileStamp{}, fmt.Errorf("markdown: write %s: %w", path, sdk.FileProblem(err))
	}
	return st, nil
}

// writeTemp writes data durably to a new temp file beside path, to be
// renamed over it. The stamp is the temp file's, which the rename keeps.
func writeTemp(path string, data []byte) (string, fileStamp, error) {
	dir, name := filepath.Split(path)
	f, err := os.CreateTemp(dir, tempPrefix+name+".*")
	if err != nil {
		return "", fileStamp{}, fmt.Errorf("markdown: write %s: %w", path, sdk.FileProblem(err))
	}
	tmp := f.Name()
	err = f.Chmod(filePerm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	var fi fs.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", fileStamp{}, fmt.Errorf("markdown: write %s: %w", path, sdk.FileProblem(err))
	}
	return tmp, stampOf(fi), nil
}

// fileStamp identifies one version of a file without reading it.
type fileStamp struct {
	mtime int64 // ns
	size  int64
	ino   uint64
}

func stampOf(fi fs.FileInfo) fileStamp {
	return fileStamp{mtime: fi.ModTime().UnixNano(), size: fi.Size(), ino: inodeOf(fi)}
}

// recordID answers the id a directory entry name stands for, if any.
func recordID(name string) (string, bool) {
	id, ok := strings.CutSuffix(name, recordExt)
	if !ok || sdk.ValidateID(id) != nil {
		return "", false
	}
	return id, true
}
