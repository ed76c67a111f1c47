//go:build unix

package markdown

import (
	"syscall"
	"time"
)

// cpuTime is the CPU (user and system) this process has used, so a
// benchmark on a shared machine can report work beside wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
