package testbin

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel send sig to the child when the process
// that started it dies, whatever kills it: a `go test` timeout panics
// and exits without running any cleanup.
func dieWithParent(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = sig
}
