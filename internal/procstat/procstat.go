// Package procstat reads a process's processor time and resident memory
// from Linux's /proc, so the host can report its plugin processes beside
// itself (the Prometheus process collector covers the host alone) and the
// bench can count what they spend. Elsewhere every reading answers false.
package procstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// ClockTick is the unit of /proc/<pid>/stat's times: USER_HZ, 100 on every
// Linux memhost runs on.
const ClockTick = 10 * time.Millisecond

// CPU answers the user and system time process pid has spent, in whole
// ClockTicks, and false when it cannot be read.
func CPU(pid int) (time.Duration, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	return parseStat(data)
}

// Resident answers process pid's resident set size in bytes, and false
// when it cannot be read.
func Resident(pid int) (int64, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	return parseStatus(data)
}

// parseStat reads utime and stime from the text of a /proc/<pid>/stat.
func parseStat(data []byte) (time.Duration, bool) {
	// The command name, in parentheses, may hold spaces and parentheses:
	// fields are counted after its last closing one. utime and stime are
	// fields 14 and 15 of the line, 12 and 13 after the name.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseUint(string(f[11]), 10, 63)
	stime, err2 := strconv.ParseUint(string(f[12]), 10, 63)
	if err1 != nil || err2 != nil || utime+stime > uint64(1<<63-1)/uint64(ClockTick) {
		return 0, false
	}
	return time.Duration(utime+stime) * ClockTick, true
}

// parseStatus reads VmRSS from the text of a /proc/<pid>/status.
func parseStatus(data []byte) (int64, bool) {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte("kB")))), 10, 64)
		if err != nil || kb < 0 || kb > 1<<53 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}
