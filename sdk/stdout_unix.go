//go:build unix

package sdk

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// handshakeOut holds the host's stdout pipe open for the process's life:
// closed, go-plugin in the host would read the end of the plugin's
// output.
var handshakeOut *os.File

// stdoutToStderr points descriptor 1 at the plugin's stderr and leaves
// os.Stdout on a copy of the old descriptor 1, the host's pipe, for
// go-plugin's handshake line alone. What else writes to descriptor 1 (a C
// library, a raw write) then reaches the host as stderr lines, read
// whatever their length: the host reads stdout for the handshake with a
// bounded line scanner that stops at a line over 64 KiB, after which
// the plugin's writes to the full pipe would block for good.
func stdoutToStderr() {
	handshake, err := unix.Dup(1)
	if err != nil {
		return
	}
	syscall.CloseOnExec(handshake)
	if err := unix.Dup2(2, 1); err != nil {
		unix.Close(handshake)
		return
	}
	handshakeOut = os.NewFile(uintptr(handshake), "/dev/stdout")
	os.Stdout = handshakeOut
}
