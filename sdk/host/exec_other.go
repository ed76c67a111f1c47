//go:build !linux

package host

import "os/exec"

// execTarget answers the verified file's path: only Linux here executes an
// open file, so elsewhere the check after the start (verified.unchanged)
// is what catches a file swapped meanwhile.
func (vf *verified) execTarget() (string, bool) { return vf.path, true }

// ownGroup leaves the command as it is: the hard kill ends the plugin's
// process alone.
func ownGroup(*exec.Cmd) {}
