package host

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// execTarget answers what to execute for a verified file, and whether that
// is its path. A native binary runs from the verified open file itself
// (through /proc), so renaming another file over the path between the
// check and exec cannot change what runs. A script runs by path: its
// interpreter opens it again, after the descriptor is closed on exec.
func (vf *verified) execTarget() (string, bool) {
	var magic [4]byte
	if _, err := vf.f.ReadAt(magic[:], 0); err != nil || !bytes.Equal(magic[:], []byte("\x7fELF")) {
		return vf.path, true
	}
	fd := fmt.Sprintf("/proc/self/fd/%d", vf.f.Fd())
	if _, err := os.Stat(fd); err != nil {
		return vf.path, true
	}
	return fd, false
}

// ownGroup puts the plugin in a process group of its own and makes the
// command's hard kill end the whole group: a child the plugin left behind
// (a helper, a worker) holding its stdout or stderr would otherwise keep
// go-plugin waiting for the output to end, and the host's stop with it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
}
