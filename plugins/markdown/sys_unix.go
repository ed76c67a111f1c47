//go:build unix

package markdown

import (
	"io/fs"
	"os"
	"syscall"
)

// openNoFollow makes opening a record file fail on a symlink swapped in
// after the file was listed; openNoWait makes opening a FIFO swapped in
// so return at once (its Stat then refuses it) rather than wait for a
// writer that never comes.
const (
	openNoFollow = syscall.O_NOFOLLOW
	openNoWait   = syscall.O_NONBLOCK
)

func inodeOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

// syncDir makes a directory's entries (a rename, a new file) durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
