package host

import (
	"os"
	"syscall"
)

// identity answers fi's identity and whether it is complete enough to
// remember a verdict by.
func identity(fi os.FileInfo) (fileID, bool) {
	id := fileID{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return id, false
	}
	id.dev, id.ino, id.ctime = uint64(st.Dev), uint64(st.Ino), st.Ctim.Nano() // widths differ by architecture
	return id, true
}
