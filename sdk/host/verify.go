package host

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/memhost/memhost/sdk"
)

// verifySettle is how old a file's timestamps must be, when it is hashed,
// for the verdict to be remembered. Filesystem timestamps are coarse (a
// clock tick on Linux, a second or two on older filesystems), so a write
// in the same tick as the hash would leave the file's identity unchanged;
// a file that changed that recently is hashed again at its next launch.
const verifySettle = 2 * time.Second

// Verifier checks plugin executables against their manifests' sha256 and
// remembers each verdict by file identity (device, inode, size, mtime and
// ctime), so restarting a plugin does not hash its binary again. Renaming
// another file over the path changes the inode; writing it in place
// changes mtime and ctime (which no caller can set back): either makes the
// next launch hash the file again. One Verifier serves a host's launches;
// it is safe for concurrent use, and its zero value is ready to use.
type Verifier struct {
	mu     sync.Mutex
	known  map[string]verdict // by path
	hashes atomic.Int64
	now    func() time.Time // tests move the clock
	// beforeExec, when set, runs between the check and the exec: tests
	// change the file there.
	beforeExec func()
}

type verdict struct {
	id  fileID
	sum [sha256.Size]byte
}

// NewVerifier answers an empty Verifier.
func NewVerifier() *Verifier { return &Verifier{} }

// Hashes is how many times v has read and hashed an executable.
func (v *Verifier) Hashes() int64 { return v.hashes.Load() }

// verified is an executable that matched its manifest, still open: the
// launch executes this very file where the system allows it, and checks
// after the start that it did not change meanwhile.
type verified struct {
	f    *os.File
	path string
	id   fileID
}

// errChanged is why a launch is refused when the executable changed while
// it was hashed or started.
var errChanged = refuse("executable changed while it was verified or started; try again once it is no longer being written")

// check opens path and verifies it against want, from the remembered
// verdict when the file's identity is unchanged since it was hashed. The
// caller closes the answer's file.
func (v *Verifier) check(path string, want []byte) (*verified, error) {
	// Non-blocking, so a FIFO put in the executable's place is refused
	// as no regular file instead of blocking the open until a writer
	// comes; a regular file reads the same either way.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		// The label names the path already.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("start failed: cannot open the executable: %w: %w", err, sdk.ErrUnavailable)
	}
	vf, err := v.checkOpen(f, path, want)
	if err != nil {
		f.Close()
		return nil, err
	}
	return vf, nil
}

func (v *Verifier) checkOpen(f *os.File, path string, want []byte) (*verified, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat executable: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("executable is not a regular file: %w", sdk.ErrInvalid)
	}
	id, cacheable := identity(fi)
	if cacheable {
		v.mu.Lock()
		known, ok := v.known[path]
		v.mu.Unlock()
		if ok && known.id == id {
			if !bytes.Equal(known.sum[:], want) {
				return nil, mismatch(want)
			}
			return &verified{f: f, path: path, id: id}, nil
		}
	}
	started := time.Now()
	if v.now != nil {
		started = v.now()
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("hash executable: %w", err)
	}
	v.hashes.Add(1)
	if fi, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("stat executable: %w", err)
	}
	if after, _ := identity(fi); after != id {
		v.forget(path)
		return nil, errChanged
	}
	var vd verdict
	vd.id = id
	h.Sum(vd.sum[:0])
	v.mu.Lock()
	if cacheable && id.settledAt(started) {
		if v.known == nil {
			v.known = map[string]verdict{}
		}
		v.known[path] = vd
	} else {
		delete(v.known, path)
	}
	v.mu.Unlock()
	if !bytes.Equal(vd.sum[:], want) {
		return nil, mismatch(want)
	}
	return &verified{f: f, path: path, id: id}, nil
}

func (v *Verifier) forget(path string) {
	v.mu.Lock()
	delete(v.known, path)
	v.mu.Unlock()
}

// unchanged reports whether the verified file is still what was hashed,
// both the open file and (when exec went by path) the file at its path.
func (vf *verified) unchanged(byPath bool) bool {
	fi, err := vf.f.Stat()
	if err != nil {
		return false
	}
	if id, _ := identity(fi); id != vf.id {
		return false
	}
	if !byPath {
		return true
	}
	fi, err = os.Stat(vf.path)
	if err != nil {
		return false
	}
	id, _ := identity(fi)
	return id == vf.id
}

func mismatch(want []byte) error {
	return refuse("refused: executable sha256 does not match manifest sha256 %x (changed since its manifest was written; if the change is yours, write it again with memhost plugins manifest)", want)
}

// refuse is a launch refused by a check of what it would run: the message
// says why, and the error reads as sdk.ErrPermission (its code) without
// ending in "permission denied" as well.
func refuse(format string, args ...any) error {
	return &refusal{fmt.Errorf(format, args...)}
}

type refusal struct{ err error }

func (r *refusal) Error() string   { return r.err.Error() }
func (r *refusal) Unwrap() []error { return []error{r.err, sdk.ErrPermission} }

// fileID is what identifies one version of a file. Where the system gives
// no inode or ctime, only size and mtime are filled and verdicts are not
// remembered.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
}

// settledAt reports whether the file had last changed at least
// verifySettle before t.
func (id fileID) settledAt(t time.Time) bool {
	last := max(id.mtime, id.ctime)
	return t.UnixNano()-last >= int64(verifySettle)
}
