//go:build !unix

package static

import "io/fs"

func stampOf(fi fs.FileInfo) fileStamp { return fileStamp{mod: fi.ModTime(), size: fi.Size()} }
