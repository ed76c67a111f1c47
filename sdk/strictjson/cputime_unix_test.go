//go:build unix

package strictjson

import (
	"syscall"
	"time"
)

// processCPU answers the CPU time (user + system) the process has used:
// on a shared machine it measures work where wall time measures waiting.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
