//go:build !linux

package testbin

import (
	"os/exec"
	"syscall"
)

// dieWithParent does nothing where the kernel has no parent-death signal:
// there a test's children rely on its cleanups alone.
func dieWithParent(*exec.Cmd, syscall.Signal) {}
